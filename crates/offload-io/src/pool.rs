//! A small scoped thread pool for writing several outputs at once.

/// Runs `work` on every item (with its index), spread over up to four
/// threads; the results come back in item order, `None` where a thread
/// panicked.
pub(crate) fn in_parallel<T: Send, R: Send>(
    items: &mut [T],
    work: impl Fn(usize, &mut T) -> R + Sync,
) -> Vec<Option<R>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    let per_thread = items.len().div_ceil(threads).max(1);
    let work = &work;
    std::thread::scope(|scope| {
        let jobs: Vec<_> = items
            .chunks_mut(per_thread)
            .enumerate()
            .map(|(c, chunk)| {
                let len = chunk.len();
                let job = scope.spawn(move || {
                    chunk.iter_mut().enumerate().map(|(i, item)| work(c * per_thread + i, item)).collect::<Vec<_>>()
                });
                (job, len)
            })
            .collect();
        jobs.into_iter()
            .flat_map(|(job, len)| match job.join() {
                Ok(results) => results.into_iter().map(Some).collect(),
                Err(_) => std::iter::repeat_with(|| None).take(len).collect::<Vec<_>>(),
            })
            .collect()
    })
}

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

/// Runs `work` on every item (with its index) on up to `threads` threads
/// (0: one per core), each thread taking the next item when it is done
/// with one, so that a few large items do not leave the other threads
/// idle; the results come back in item order, `None` where a thread
/// panicked. Memory is bounded by `threads` items in flight: the package
/// and folder rewrites of `offload-rewrite` hold one member per thread.
pub fn for_each_item<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    work: impl Fn(usize, &T) -> R + Sync,
) -> Vec<Option<R>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if threads == 0 { cores } else { threads }.clamp(1, items.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(std::iter::repeat_with(|| None).take(items.len()).collect());
    let work = &work;
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = work(i, item);
                    if let Ok(mut all) = results.lock()
                        && let Some(slot) = all.get_mut(i)
                    {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    results.into_inner().unwrap_or_default()
}

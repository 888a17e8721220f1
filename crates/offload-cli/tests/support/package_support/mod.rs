//! Builds small packages for the package tests with the containers' own
//! writers: zip (stored or deflated members), tar, gzip/xz/zstd/bzip2
//! streams, `ar` archives as dpkg writes them, and the two conda layouts.
#![allow(dead_code)]

use std::io::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Z {
    Gzip,
    Xz,
    Zstd,
    Bzip2,
}

pub const ALL: [Z; 4] = [Z::Gzip, Z::Xz, Z::Zstd, Z::Bzip2];

impl Z {
    pub fn ext(self) -> &'static str {
        match self {
            Z::Gzip => "gz",
            Z::Xz => "xz",
            Z::Zstd => "zst",
            Z::Bzip2 => "bz2",
        }
    }
}

/// A zip archive; `true` deflates the member, `false` stores it.
pub fn zip_of(members: &[(&str, &[u8], bool)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data, deflate) in members {
        let method = if *deflate { zip::CompressionMethod::Deflated } else { zip::CompressionMethod::Stored };
        w.start_file(*name, zip::write::SimpleFileOptions::default().compression_method(method)).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

pub fn tar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

pub fn compress(z: Z, data: &[u8]) -> Vec<u8> {
    match z {
        Z::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Z::Xz => {
            let mut e = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::default()).unwrap();
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Z::Zstd => zstd::encode_all(data, 3).unwrap(),
        Z::Bzip2 => {
            let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
    }
}

/// An `ar` archive as dpkg writes it (plain names, no symbol table).
pub fn ar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    for (name, data) in members {
        out.extend(format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n", 0, 0, 0, 100644, data.len()).as_bytes());
        out.extend(*data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}

/// A Debian package whose data tarball (xz) holds `files`.
pub fn deb_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let control = compress(Z::Gzip, &tar_of(&[("./control", b"Package: x\nVersion: 1\n")]));
    let data = compress(Z::Xz, &tar_of(files));
    ar_of(&[("debian-binary", b"2.0\n"), ("control.tar.gz", &control), ("data.tar.xz", &data)])
}

/// A `.conda` package: a zip of stored zstd tarballs, the files in `pkg-*`.
pub fn conda_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let pkg = compress(Z::Zstd, &tar_of(files));
    let info = compress(Z::Zstd, &tar_of(&[("info/index.json", b"{\"name\": \"x\"}")]));
    zip_of(&[
        ("metadata.json", b"{\"conda_pkg_format_version\": 2}", false),
        ("pkg-x-1.0-0.tar.zst", &pkg, false),
        ("info-x-1.0-0.tar.zst", &info, false),
    ])
}

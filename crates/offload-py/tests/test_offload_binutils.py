"""offload_binutils against the `offload` CLI of the same build (its --json
output, extract and exit messages) on the repository's samples and the
inspector's fixtures. Run by scripts/test-python.sh, which sets OFFLOAD_BIN.
"""

import ast
import json
import os
import pathlib
import subprocess
import threading

import pytest

import offload_binutils as ob

REPO = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = "crates/offload-cli/tests/fixtures/inspect"
FILES = [
    "samples/hip-gfx906-gfx90a.bc",
    "samples/hip-gfx906-gfx90a.compressed.bc",
    f"{FIXTURES}/libscale.so",
    f"{FIXTURES}/libtwo.so",
    f"{FIXTURES}/libfat.a",
    f"{FIXTURES}/newdrv.o",
]


# The environment that makes the drop-in tools follow LLVM 19, as the
# module's bundle() and pack() do.
LLVM19 = {**os.environ, "OFFLOAD_LLVM_VERSION": "19"}


def tool(name):
    env = os.environ.get("OFFLOAD_BIN")
    base = pathlib.Path(env).parent if env else REPO / "target" / "debug"
    path = base / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: build it (cargo build -p offload-cli) or set OFFLOAD_BIN")
    return str(path)


def cli(*args):
    """Runs `offload ARGS` in the repository root: (exit code, stdout, stderr)."""
    p = subprocess.run([tool("offload"), *args], cwd=REPO, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode()


def cli_json(*args):
    code, out, err = cli(*args, "--json")
    return code, json.loads(out), err


def read(path):
    return (REPO / path).read_bytes()


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


@pytest.mark.parametrize("path", FILES)
def test_scan_matches_list_json(path):
    code, expected, _ = cli_json("list", path)
    assert code == 0
    got = [c.to_dict() for c in ob.scan(path)]
    assert got == expected
    assert len(got) >= 2


@pytest.mark.parametrize("path", FILES)
def test_scan_of_bytes_has_no_file_and_the_same_records(path):
    from_path = ob.scan(pathlib.Path(path))
    from_bytes = ob.scan(read(path))
    assert [c.file for c in from_bytes] == [None] * len(from_path)
    # Bytes are in no file, so their code objects have no URI.
    assert [c.uri for c in from_bytes] == [None] * len(from_path)
    assert all(c.uri.startswith("file:///") for c in from_path)
    strip = lambda cs: [{k: v for k, v in c.to_dict().items() if k not in ("file", "uri")} for c in cs]
    # Archive locations name the archive: bytes have no name but "<bytes>".
    renamed = [c.to_dict() | {"location": c.location.replace("<bytes>", pathlib.Path(path).name)} for c in from_bytes]
    assert [{k: v for k, v in d.items() if k not in ("file", "uri")} for d in renamed] == strip(from_path)
    assert strip(ob.scan(bytearray(read(path)))) == strip(from_bytes)


def test_scan_without_code_objects_is_an_empty_list(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_bytes(b"no offload code here\n")
    assert ob.scan(str(plain)) == []
    assert ob.scan(b"") == []


def test_missing_file_raises_the_cli_message():
    code, _, err = cli("list", "/nonexistent/x.so")
    # A file that cannot be read is an I/O error: exit status 2.
    assert code == 2
    with pytest.raises(ob.FileError) as e:
        ob.scan("/nonexistent/x.so")
    assert isinstance(e.value, ob.Error)
    assert str(e.value) == "'/nonexistent/x.so': No such file or directory"
    assert f"error: {e.value}" in err


SELECT_CASES = [
    ("samples/hip-gfx906-gfx90a.bc", "gfx90a:xnack+", "hip"),
    ("samples/hip-gfx906-gfx90a.bc", "gfx90a:xnack-", "hip"),
    ("samples/hip-gfx906-gfx90a.compressed.bc", "gfx906", "hip"),
    (f"{FIXTURES}/libscale.so", "gfx90a:sramecc+:xnack+", "hip"),
    (f"{FIXTURES}/libtwo.so", "gfx906", "hip"),
    (f"{FIXTURES}/libfat.a", "gfx906", "hip"),
    (f"{FIXTURES}/libfat.a", "gfx906", "openmp"),
]


@pytest.mark.parametrize("path,gpu,runtime", SELECT_CASES)
def test_select_matches_select_json(path, gpu, runtime):
    code, expected, err = cli_json("select", "--gpu", gpu, "--kind", runtime, path)
    if code == 0:
        got = ob.select(path, gpu=gpu, runtime=runtime)
    else:
        with pytest.raises(ob.SelectError) as e:
            ob.select(path, gpu=gpu, runtime=runtime)
        # The CLI prints the same message after "offload: error: ".
        assert err.rstrip("\n").endswith(f"error: {e.value}")
        got = e.value.candidates
    assert [c.to_dict() for c in got] == expected


def test_select_rejects_bad_arguments():
    with pytest.raises(ob.InvalidArgumentError, match="gfx90a:xnack"):
        ob.select(FILES[0], gpu="gfx90a:xnack")
    with pytest.raises(ob.InvalidArgumentError, match="'vulkan' is not hip, openmp or cuda"):
        ob.select(FILES[0], gpu="gfx906", runtime="vulkan")


@pytest.mark.parametrize("path", FILES)
def test_extract_matches_offload_extract(path, tmp_path):
    objects = [c for c in ob.scan(path) if not c.container]
    for c in objects:
        dest = tmp_path / f"{c.index}.bin"
        code, _, err = cli("extract", "--index", str(c.index), "-o", str(dest), path)
        assert code == 0, err
        assert ob.extract(path, c) == dest.read_bytes()
        assert ob.extract(read(path), c.index) == dest.read_bytes()


def test_extract_of_a_code_object_from_another_file_fails():
    other = ob.scan(f"{FIXTURES}/libscale.so")[1]
    with pytest.raises(ob.InvalidArgumentError, match="no code object matches"):
        ob.extract(FILES[0], other)


@pytest.mark.parametrize("path", FILES)
def test_verify_matches_verify_json(path):
    code, expected, _ = cli_json("verify", path)
    got = [d.to_dict() for d in ob.verify(path)]
    assert got == expected
    assert (code == 0) == all(d["severity"] != "error" for d in got)


def test_verify_of_damaged_input_reports_errors():
    data = bytearray(read(FILES[1]))
    data[40] ^= 0xFF  # inside the compressed stream
    found = ob.verify(bytes(data))
    assert any(d.severity == "error" for d in found)


SAMPLE_TARGETS = [
    "host-x86_64-unknown-linux-gnu",
    "hip-amdgcn-amd-amdhsa--gfx906",
    "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
]


def test_unbundle_then_bundle_gives_the_sample_back():
    sample = read(FILES[0])
    payloads = ob.unbundle(FILES[0], SAMPLE_TARGETS)
    assert payloads == [ob.extract(sample, c) for c in ob.scan(sample)]
    assert ob.bundle(SAMPLE_TARGETS, payloads) == sample
    # The compressed sample holds the same bundle.
    assert ob.unbundle(read(FILES[1]), SAMPLE_TARGETS) == payloads
    assert ob.decompress(FILES[1]) == sample


def test_bundle_compressed_matches_clang_offload_bundler(tmp_path):
    payloads = ob.unbundle(FILES[0], SAMPLE_TARGETS)
    inputs = []
    for i, p in enumerate(payloads):
        f = tmp_path / f"in{i}"
        f.write_bytes(p)
        inputs.append(str(f))
    out = tmp_path / "out.bc"
    # The module writes what LLVM 19 writes (CCOB v2); the drop-in follows
    # LLVM 22 unless told otherwise.
    subprocess.run(
        [tool("clang-offload-bundler"), "-type=bc", "-compress", "-targets=" + ",".join(SAMPLE_TARGETS),
         *("-input=" + i for i in inputs), "-output=" + str(out)],
        check=True,
        env=LLVM19,
    )
    packed = ob.bundle(SAMPLE_TARGETS, payloads, compress=True)
    assert packed == out.read_bytes()
    assert ob.decompress(packed) == ob.bundle(SAMPLE_TARGETS, payloads)


def test_bundler_errors_have_llvms_words():
    with pytest.raises(ob.BundlerError, match="number of input files and targets should match in bundling mode"):
        ob.bundle(SAMPLE_TARGETS, [b"x"])
    with pytest.raises(ob.BundlerError, match="Can't find bundles for hip-amdgcn-amd-amdhsa--gfx1100"):
        ob.unbundle(FILES[0], ["host-x86_64-unknown-linux-gnu", "hip-amdgcn-amd-amdhsa--gfx1100"])
    assert ob.unbundle(FILES[0], ["hip-amdgcn-amd-amdhsa--gfx1100"], allow_missing=True) == [b""]


def test_pack_matches_clang_offload_packager_and_unpacks(tmp_path):
    images = [
        {"image": b"\x7fELF-one", "file": "a.o", "triple": "amdgcn-amd-amdhsa", "arch": "gfx906", "kind": "hip"},
        {"image": b"\x7fELF-two", "file": "b.o", "triple": "nvptx64-nvidia-cuda", "arch": "sm_80", "kind": "openmp"},
    ]
    args = []
    for img in images:
        f = tmp_path / img["file"]
        f.write_bytes(img["image"])
        args.append(f"--image=file={f},triple={img['triple']},arch={img['arch']},kind={img['kind']}")
    out = tmp_path / "pkg.out"
    subprocess.run([tool("clang-offload-packager"), "-o", str(out), *args], check=True, env=LLVM19)
    packed = ob.pack(images)
    assert packed == out.read_bytes()
    unpacked = ob.unpack(packed)
    assert [u["image"] for u in unpacked] == [b"\x7fELF-one", b"\x7fELF-two"]
    assert [u["offload_kind"] for u in unpacked] == ["hip", "openmp"]
    assert [u["image_kind"] for u in unpacked] == ["o", "o"]
    assert unpacked[1]["strings"] == {"triple": "nvptx64-nvidia-cuda", "arch": "sm_80"}
    assert [c.id for c in ob.scan(packed)] == ["amdgcn-amd-amdhsa-gfx906", "nvptx64-nvidia-cuda-sm_80"]
    with pytest.raises(ob.InvalidArgumentError, match="'image' and 'triple' are required"):
        ob.pack([{"image": b"x"}])
    with pytest.raises(ob.FormatError):
        ob.unpack(b"\x10\xff\x10\xad" + b"\x00" * 60)


# LLVM 22's own tools, for the llvm_version=22 writers. Missing, their
# comparisons are skipped (and fail under OFFLOAD_REQUIRE_LLVM=1, as CI
# sets); the comparisons with our drop-ins (the Rust library) always run.
LLVM22_BIN = pathlib.Path(os.environ.get("OFFLOAD_LLVM22_BIN", "/usr/lib/llvm-22/bin"))


def llvm22_tools(*names):
    paths = [LLVM22_BIN / n for n in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        if os.environ.get("OFFLOAD_REQUIRE_LLVM") == "1":
            pytest.fail(f"OFFLOAD_REQUIRE_LLVM=1 but LLVM 22 is missing: {missing}")
        pytest.skip(f"needs LLVM 22 ({', '.join(missing)}): run scripts/install-reference-llvm.sh")
    return [str(p) for p in paths]


# Entry IDs with the `-unknown-` environment, which LLVM 22 writes as empty
# for the AMDHSA OS and LLVM 19 keeps as given.
UNKNOWN_ENV_TARGETS = [
    "host-x86_64-unknown-linux-gnu",
    "hip-amdgcn-amd-amdhsa-unknown-gfx906",
    "hip-amdgcn-amd-amdhsa-unknown-gfx90a:xnack+",
]


def bundle_with(bundler, targets, payloads, tmp_path, *flags, env=None):
    inputs = []
    for i, p in enumerate(payloads):
        f = tmp_path / f"in{i}"
        f.write_bytes(p)
        inputs.append("-input=" + str(f))
    out = tmp_path / "out.bc"
    subprocess.run([bundler, "-type=bc", *flags, "-targets=" + ",".join(targets), *inputs, "-output=" + str(out)],
                   check=True, env=env)
    return out.read_bytes()


@pytest.mark.parametrize("compress", [False, True])
def test_bundle_llvm22_matches_our_bundler(compress, tmp_path):
    payloads = ob.unbundle(FILES[0], SAMPLE_TARGETS)
    flags = ["-compress"] if compress else []
    # Our drop-in follows LLVM 22 by default (OFFLOAD_LLVM_VERSION unset).
    env = {k: v for k, v in os.environ.items() if k != "OFFLOAD_LLVM_VERSION"}
    ours = bundle_with(tool("clang-offload-bundler"), UNKNOWN_ENV_TARGETS, payloads, tmp_path, *flags, env=env)
    written = ob.bundle(UNKNOWN_ENV_TARGETS, payloads, compress=compress, llvm_version=22)
    assert written == ours
    as19 = ob.bundle(UNKNOWN_ENV_TARGETS, payloads, compress=compress)
    assert as19 == ob.bundle(UNKNOWN_ENV_TARGETS, payloads, compress=compress, llvm_version=19)
    assert written != as19
    if compress:
        # CCOB version (u16 after the magic): 3 for LLVM 22, 2 for LLVM 19.
        assert written[:6] == b"CCOB\x03\x00" and as19[:6] == b"CCOB\x02\x00"
    plain = ob.decompress(written) if compress else written
    assert b"hip-amdgcn-amd-amdhsa--gfx906" in plain and b"-unknown-gfx906" not in plain
    assert b"hip-amdgcn-amd-amdhsa-unknown-gfx906" in (ob.decompress(as19) if compress else as19)
    # Either release's bundle unbundles to the same payloads.
    assert ob.unbundle(written, SAMPLE_TARGETS, llvm_version=22) == payloads
    assert ob.unbundle(written, UNKNOWN_ENV_TARGETS, llvm_version=22) == payloads


@pytest.mark.parametrize("compress", [False, True])
def test_bundle_llvm22_matches_llvm22s_bundler(compress, tmp_path):
    (bundler,) = llvm22_tools("clang-offload-bundler")
    payloads = ob.unbundle(FILES[0], SAMPLE_TARGETS)
    flags = ["-compress"] if compress else []
    theirs = bundle_with(bundler, UNKNOWN_ENV_TARGETS, payloads, tmp_path, *flags)
    assert ob.bundle(UNKNOWN_ENV_TARGETS, payloads, compress=compress, llvm_version=22) == theirs
    out = [tmp_path / f"out{i}" for i in range(len(UNKNOWN_ENV_TARGETS))]
    subprocess.run([bundler, "-type=bc", "-unbundle", "-targets=" + ",".join(UNKNOWN_ENV_TARGETS),
                    "-input=" + str(tmp_path / "out.bc"), *("-output=" + str(o) for o in out)], check=True)
    assert ob.unbundle(theirs, UNKNOWN_ENV_TARGETS, llvm_version=22) == [o.read_bytes() for o in out]


PACK_IMAGES = [
    {"image": b"\x7fELF-one", "file": "a.o", "triple": "amdgcn-amd-amdhsa", "arch": "gfx906", "kind": "hip"},
    {"image": b"\x7fELF-two", "file": "b.o", "triple": "nvptx64-nvidia-cuda", "arch": "sm_80", "kind": "openmp"},
    {"image": b"BC\xc0\xde", "file": "c.bc", "triple": "spirv64-intel", "arch": "", "kind": "sycl"},
]


def pack_with(packager, images, tmp_path, env=None):
    args = []
    for img in images:
        f = tmp_path / img["file"]
        f.write_bytes(img["image"])
        args.append(f"--image=file={f},triple={img['triple']},arch={img['arch']},kind={img['kind']}")
    out = tmp_path / "pkg.out"
    subprocess.run([packager, "-o", str(out), *args], check=True, env=env)
    return out.read_bytes()


def stored_kinds(packed):
    """The offload-kind numbers of the entries of concatenated version 1
    OffloadBinaries: the header's entry offset (u64 at 16), the kind (u16)
    two bytes into the entry, the binary's size (u64 at 8)."""
    kinds, at = [], 0
    while at < len(packed):
        size = int.from_bytes(packed[at + 8:at + 16], "little")
        entry = at + int.from_bytes(packed[at + 16:at + 24], "little")
        kinds.append(int.from_bytes(packed[entry + 2:entry + 4], "little"))
        at += size
    return kinds


def test_pack_llvm22_matches_our_llvm_offload_binary(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OFFLOAD_LLVM_VERSION"}
    ours = pack_with(tool("llvm-offload-binary"), PACK_IMAGES, tmp_path, env=env)
    packed = ob.pack(PACK_IMAGES, llvm_version=22)
    assert packed == ours
    # The bit mask of LLVM 21 on: HIP 4, OpenMP 1, SYCL 8; LLVM 19 stores HIP as 3.
    assert stored_kinds(packed) == [4, 1, 8]
    assert stored_kinds(ob.pack(PACK_IMAGES[:2])) == [3, 1]
    assert [u["offload_kind"] for u in ob.unpack(packed)] == ["hip", "openmp", "sycl"]
    # LLVM 22's packager needs no triple.
    assert ob.unpack(ob.pack([{"image": b"x"}], llvm_version=22))[0]["strings"] == {}
    with pytest.raises(ob.InvalidArgumentError, match="'image' is a required"):
        ob.pack([{"triple": "t"}], llvm_version=22)


def test_pack_llvm22_matches_llvm22s_llvm_offload_binary(tmp_path):
    (packager,) = llvm22_tools("llvm-offload-binary")
    assert ob.pack(PACK_IMAGES, llvm_version=22) == pack_with(packager, PACK_IMAGES, tmp_path)


@pytest.mark.parametrize("version", [0, 14, 20, 23])
def test_writers_refuse_other_llvm_versions(version):
    for call in (lambda: ob.bundle(SAMPLE_TARGETS, [b"", b"", b""], llvm_version=version),
                 lambda: ob.unbundle(FILES[0], SAMPLE_TARGETS, llvm_version=version),
                 lambda: ob.pack([{"image": b"x", "triple": "t"}], llvm_version=version)):
        with pytest.raises(ob.InvalidArgumentError, match="follow LLVM 19 or 22"):
            call()


def test_threads_share_the_module():
    # The work runs without the GIL; results must not depend on threading.
    expected = ob.extract(FILES[1], 2)
    results = []
    threads = [threading.Thread(target=lambda: results.append(ob.extract(FILES[1], 2))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 8


def test_type_stubs_are_installed_and_complete():
    package = pathlib.Path(ob.__file__).parent
    stub = next(package.glob("*.pyi"), None)
    assert stub is not None, f"no .pyi in {package}"
    assert (package / "py.typed").is_file()
    tree = ast.parse(stub.read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names.discard("UnpackedImage")
    for name in names:
        assert hasattr(ob, name), name
    public = {n for n in dir(ob) if not n.startswith("_")} - {"offload_binutils"}
    assert public <= names, public - names


@pytest.mark.parametrize("path", FILES[:2])
def test_damaged_input_raises_only_offload_errors(path):
    original = read(path)
    for at in range(len(original)):
        data = bytearray(original)
        data[at] ^= 0xFF
        data = bytes(data)
        for call in (
            lambda: ob.scan(data),
            lambda: ob.verify(data),
            lambda: [ob.extract(data, c) for c in ob.scan(data)],
            lambda: ob.select(data, gpu="gfx906"),
            lambda: ob.unbundle(data, SAMPLE_TARGETS[1:], allow_missing=True),
        ):
            try:
                call()
            except ob.Error:
                pass


def test_kernels_match_the_cli():
    path = str(REPO / FIXTURES / "libscale.so")
    rows = ob.kernels(path)
    assert [(r["target"], r["name"], r["demangled"]) for r in rows] == [
        ("gfx906", "_Z5scalePff", "scale(float*, float)"),
        ("gfx90a:xnack+", "_Z5scalePff", "scale(float*, float)"),
    ]
    assert rows[0]["resources"]["kernarg_size"] == 12
    assert rows[0]["occupancy"]["unit"] == "simd"
    # The same records from bytes, and as `offload kernels --json` prints them.
    assert ob.kernels(pathlib.Path(path).read_bytes()) == rows
    out = subprocess.run([tool("offload"), "kernels", "--json", path], capture_output=True, text=True, check=True)
    cli = json.loads(out.stdout)["kernels"]
    assert [(r["target"], r["name"], r["resources"]) for r in cli] == [
        (r["target"], r["name"], r["resources"]) for r in rows
    ]

#!/usr/bin/env python3
# Usage: synth_library.py BUNDLES ENTRY_BYTES OUT (docs/guide/pruning.md, "Measured").
# A synthetic ET_EXEC x86-64 file shaped like librocsparse: N bundles of 7
# 4096-aligned code objects in .hip_fatbin, N absolute HIPF wrappers.
import struct, os, sys
N, SIZE = int(sys.argv[1]), int(sys.argv[2])
targets = ["gfx906", "gfx908", "gfx90a:xnack+", "gfx90a:xnack-", "gfx942", "gfx1030", "gfx1100"]
blob = os.urandom(SIZE)
def al(x, a=4096): return (x + a - 1) // a * a
def bundle():
    ids = [b"host-x86_64-unknown-linux--"] + [("hipv4-amdgcn-amd-amdhsa--" + t).encode() for t in targets]
    hdr = 32 + sum(24 + len(i) for i in ids)
    offs, cur = [], hdr
    for i in ids:
        size = 0 if i.startswith(b"host") else SIZE
        o = al(cur); offs.append((o, size)); cur = o + size
    h = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids))
    for i, (o, s) in zip(ids, offs): h += struct.pack("<QQQ", o, s, len(i)) + i
    return h, offs, cur
h, offs, blen = bundle()
FAT_OFF, BASE = 0x1000, 0x400000
f = open(sys.argv[3], "wb")
f.write(b"\0" * FAT_OFF)
starts = []
for n in range(N):
    start = f.tell(); starts.append(start)
    f.write(h)
    for o, s in offs:
        if s: f.seek(start + o); f.write(blob)
    f.seek(start + al(blen))
fat_size = f.tell() - FAT_OFF
seg_off = f.tell()
for s in starts: f.write(struct.pack("<IIQQ", 0x48495046, 1, BASE + s, 0))
shstr = b"\0.hip_fatbin\0.hipFatBinSegment\0.shstrtab\0"
str_off = f.tell(); f.write(shstr)
sh_off = al(f.tell(), 8); f.seek(sh_off)
def sh(name, typ, flags, addr, off, size, align): return struct.pack("<IIQQQQIIQQ", name, typ, flags, addr, off, size, 0, 0, align, 0)
f.write(sh(0,0,0,0,0,0,0))
f.write(sh(1,1,2,BASE+FAT_OFF,FAT_OFF,fat_size,4096))
f.write(sh(13,1,3,BASE+seg_off,seg_off,24*N,8))
f.write(sh(31,3,0,0,str_off,len(shstr),1))
end = sh_off + 4*64
f.seek(0)
f.write(b"\x7fELF\x02\x01\x01" + b"\0"*9 + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, BASE, 64, sh_off, 0, 64, 56, 1, 64, 4, 3))
f.write(struct.pack("<IIQQQQQQ", 1, 4, 0, BASE, BASE, end, end, 4096))
f.close()

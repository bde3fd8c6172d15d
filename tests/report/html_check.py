#!/usr/bin/python3
"""Renders `loom report --html` pages in headless Chromium and checks what a
reader would: the page logs nothing to the console (no errors, no warnings)
and its screenshot is not blank (many colours; most of it not background).

  /usr/bin/python3 html_check.py LOOM_BIN TRACE...

A TRACE of the form diff:BASE,NEW checks `loom diff BASE NEW --html`.

The console check is first proved on a page that logs an error on purpose.
Exits 77 (skipped) when Chromium is not installed."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    print("SKIP: chromium is not installed (apt-get install chromium)")
    sys.exit(1 if os.environ.get("LOOM_TP_REQUIRED") else 77)  # required in scripts/test.sh


def render(html, png):
    """Console lines Chromium logged while loading html; writes png."""
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--no-first-run", "--window-size=1280,1800", "--enable-logging=stderr", "--v=0",
                        "--screenshot=" + png, "file://" + html],
                       capture_output=True, text=True, timeout=180)
    return [l for l in r.stderr.splitlines() if "CONSOLE" in l]


def pixels(path):
    """(width, height, rows of RGB(A) tuples) of an 8-bit PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6), f"unexpected PNG type {depth}/{ctype}"
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, out, i = zlib.decompress(idat), w * bpp, bytearray(w * bpp), [], 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, out


def not_blank(png):
    w, h, rows = pixels(png)
    counts = {}
    for row in rows[::4]:
        for p in row[::4]:
            counts[p] = counts.get(p, 0) + 1
    background, n = max(counts.values()), sum(counts.values())
    return len(counts), 1 - background / n


failures = 0
with tempfile.TemporaryDirectory() as tmp:
    bad = os.path.join(tmp, "bad.html")
    with open(bad, "w") as f:
        f.write("<!DOCTYPE html><html><body>x<script>console.error('on purpose')</script></body></html>")
    if not render(bad, os.path.join(tmp, "bad.png")):
        print("BAD: Chromium's console output is not seen; the check would prove nothing")
        sys.exit(1)
    for trace in sys.argv[2:]:
        html, png = os.path.join(tmp, "r.html"), os.path.join(tmp, "r.png")
        cmd = (["diff"] + trace[5:].split(",", 1) if trace.startswith("diff:") else
               ["report", trace])
        subprocess.run([sys.argv[1], *cmd, "--html", html, "-o", os.devnull], check=True)
        console = render(html, png)
        colours, inked = not_blank(png)
        ok = not console and colours >= 8 and inked >= 0.02
        failures += not ok
        print(f"{'ok ' if ok else 'BAD'} {os.path.basename(trace)}: {len(console)} console lines, "
              f"{colours} colours, {inked:.1%} not background")
        for line in console:
            print("    " + line)
print("FAILED" if failures else "all pages render cleanly")
sys.exit(1 if failures else 0)

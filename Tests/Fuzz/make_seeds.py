#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into Tests/Fuzz/Corpus/<target>/.

Each fuzz target reads its run's parameters (chunk sizes, limits, the declared length) from
the END of an input (Sources/ImgdFuzz/FuzzInput.swift), so each seed is a document followed
by a short trailer of parameters, written here in file order. Images come from ImageMagick
(`apt-get install imagemagick`); a format it cannot write here is skipped with a note.

Run from the repository root: python3 Tests/Fuzz/make_seeds.py
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Corpus")


def write(target, name, data):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def list_trailer(sizes=(1, 7, 64, 4096), limit=0):
    """Link lists: the limit byte, one pick per read size (index into the target's table), the count."""
    table = [1, 2, 3, 4, 5, 7, 8, 13, 16, 64, 100, 255, 1024, 4096, 8192, 65536]
    picks = [table.index(s) for s in sizes]
    return bytes([limit] + list(reversed(picks)) + [len(sizes) - 1])


def control_trailer(chunks=(1, 100), line_limit=0, pending=0, close=0):
    table = [1, 2, 3, 7, 16, 100, 4096, 65536]
    picks = [table.index(c) for c in chunks]
    return bytes([close, pending, line_limit] + list(reversed(picks)) + [len(chunks) - 1])


def image_trailer(length_choice=0, delta=0, pixels=0):
    return bytes([pixels, delta & 0xFF, delta >> 8, length_choice])


# Control lines: requests as imgctl and scripts send them, and the broken ones the daemon answers.
control = {
    "hello": b'{"cmd":"hello","id":1}\n',
    "pipelined": b'{"cmd":"ping","id":1}\n{"cmd":"get","url":"https://cdn.example/a.png","data":true,"id":2}\r\n\n  \n{"cmd":"status"}\n',
    "add": b'{"cmd":"add","urls":["https://a.example/1.png","http://b.example:8080/p?q=1#f","ftp://x/y"],"priority":"high","pin":"24h","id":"a"}\n',
    "failed-page": b'{"cmd":"failed","list":"7","limit":1000,"after":"https://a.example/1.png","id":9223372036854775807}\n',
    "escapes": b'{"cmd":"echo","s":"\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\\\/","n":-0.0,"e":1e308,"f":1.5e-7,"big":123456789012345678901234567890}\n',
    "nested": b'{"cmd":"echo","a":[[[[[[[[[[{"b":[null,true,false,{}]}]]]]]]]]]]}\n',
    "not-object": b'[1,2,3]\n"text"\n42\n{"cmd":7}\n{"id":3}\n',
    "bad-json": b'{"cmd":"get","url":}\n{"cmd":"get"\n{\n}\n\xff\xfe\n',
    "fail": b'{"cmd":"fail","url":"not a url","limit":0,"priority":"low","urls":[]}\n',
    "subscribe": b'{"cmd":"subscribe","events":["fetched","failed"],"id":1}\n{"cmd":"ping"}\n',
    "unterminated": b'{"cmd":"ping","id":"last line has no newline"}',
    "duplicate-keys": b'{"cmd":"echo","a":1,"a":2,"cmd":"echo"}\n',
}
for name, line in control.items():
    write("control-line", name, line + control_trailer())
write("control-line", "long-line", b'{"cmd":"echo","x":"' + b"y" * 400 + b'"}\n{"cmd":"ping"}\n' + control_trailer(line_limit=3))
write("control-line", "pending-limit", b'{"cmd":"ping"}\n' * 6 + control_trailer(chunks=(4096,), pending=1))


def http_trailer(chunks=(1, 100), limit=0, tcp=0, size=1000):
    """The HTTP face: the image size (two bytes), TCP or not, the head limit pick, one pick per read size, the count."""
    table = [1, 2, 3, 7, 16, 100, 4096, 65536]
    picks = [table.index(c) for c in chunks]
    return bytes([size & 0xFF, size >> 8, tcp, limit] + list(reversed(picks)) + [len(chunks) - 1])


http_requests = {
    "image-query": b"GET /image?url=https%3A%2F%2Fa.example%2Fx.png%3Fsig%3Da%2Bb&fetch=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "path-form-range": b"GET /https/cdn.example:8443/a%20b.jpg?w=1 HTTP/1.1\r\nHost: localhost\r\nRange: bytes=10-99\r\nIf-None-Match: W/\"x\"\r\n\r\n",
    "pipelined": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nHEAD /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /readyz HTTP/1.0\r\n\r\n",
    "method": b"DELETE /image?url=http%3A%2F%2Fa%2Fb HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc",
    "browser": b"GET /http/a.example/b.png HTTP/1.1\r\nHost: evil.example\r\nOrigin: https://evil.example\r\nSec-Fetch-Site: cross-site\r\n\r\n",
    "garbage": b"GET /\x00 HTTP/1.1\r\n\r\nHELLO\r\n\r\n",
}
for name, request in http_requests.items():
    write("http-request", name, request + http_trailer())
write("http-request", "small-limit", b"GET /image?url=" + b"a" * 400 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + http_trailer(chunks=(7,), limit=1, tcp=1))

text_lists = {
    "plain": b"https://a.example/1.png\nhttps://a.example/2.jpg\nhttp://b.example/x.gif?size=2\n",
    "pin-header": b"# pin: 24h\n# a comment\n\nhttps://a.example/1.png\n  https://a.example/2.png  \n",
    "ready-by-header": b"# Ready-By: 2026-12-07T05:30\n# refresh: 1d\nhttps://a.example/1.png\n# ready-by: 05:30\n",
    "crlf": b"https://a.example/1.png\r\nhttps://a.example/2.png\r\n\r\n",
    "bad-lines": b"not a url\nftp://a.example/x\nhttps://\nhttps://a.example/\xff\xfe.png\nhttps://a.example/ok.png\n",
    "no-final-newline": b"https://a.example/1.png\nhttps://a.example/2.png",
    "long-line": b"https://a.example/" + b"x" * 9000 + b".png\nhttps://a.example/after.png\n",
    "utf8": "https://bücher.example/ü.png\nhttps://例え.jp/画像.png\n".encode(),
    "bom": b"\xef\xbb\xbfhttps://a.example/1.png\n",
}
for name, text in text_lists.items():
    write("link-list-text", name, text + list_trailer())
write("link-list-text", "limited", b"https://a.example/1.png\n" * 20 + list_trailer(sizes=(3,), limit=210))

json_lists = {
    "plain": b'["https://a.example/1.png","https://a.example/2.png"]',
    "whitespace": b' \n[\n  "https://a.example/1.png" ,\n\t"https://a.example/2.png"\n]\n',
    "escapes": b'["https:\\/\\/a.example\\/\\u00fc.png","https://a.example/\\ud83d\\ude00.png","\\"quoted\\""]',
    "not-strings": b'["https://a.example/1.png",1,null,true,{"url":"https://x.example/"},["https://y.example/"]]',
    "empty": b"[]",
    "broken": b'["https://a.example/1.png",',
    "trailing-comma": b'["https://a.example/1.png",]',
    "not-array": b'{"urls":["https://a.example/1.png"]}',
    "bad-escape": b'["https://a.example/\\x.png","\\ud800"]',
    "deadline": b'{"ready_by":"2026-12-07T05:30:00.250+01:00","urls":["https://a.example/1.png",{"url":"https://a.example/2.png","pin":"1h"}]}',
    "deadline-after": b'{ "urls" : [ "https://a.example/1.png" ] , "ready_by" : "05:30" }',
}
for name, text in json_lists.items():
    write("link-list-json", name, text + list_trailer())

plists = {
    "plain": b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n<plist version="1.0">\n<array>\n\t<string>https://a.example/1.png</string>\n\t<string>https://a.example/2.png</string>\n</array>\n</plist>\n',
    "entities": b'<plist><array><string>https://a.example/p?a=1&amp;b=2&#38;c=&#x33;</string><string>&lt;bad&gt;</string></array></plist>',
    "comments": b'<plist><!-- c --><array><!-- d --><string>https://a.example/1.png</string><string/></array></plist>',
    "not-strings": b'<plist><array><integer>1</integer><dict><key>k</key><string>v</string></dict><string>https://a.example/ok.png</string><true/></array></plist>',
    "broken": b'<plist><array><string>https://a.example/1.png</string>',
    "binary": b"bplist00\xd1\x01\x02",
    "cdata": b'<plist><array><string><![CDATA[https://a.example/1.png]]></string></array></plist>',
    "empty-array": b"<plist><array/></plist>",
}
for name, text in plists.items():
    write("link-list-plist", name, text + list_trailer())

SM = b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
IM = b'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
xml_lists = {
    "urlset": b'<?xml version="1.0" encoding="UTF-8"?>\n<urlset ' + SM + b' ' + IM + b'>\n<url><loc>https://a.example/page</loc><lastmod>2026-01-01</lastmod><image:image><image:loc>https://a.example/1.png</image:loc><image:caption>c &amp; d</image:caption></image:image></url>\n<url><loc>https://a.example/2.JPG?x=1&amp;y=2</loc></url>\n</urlset>\n',
    "index": b'<sitemapindex ' + SM + b'><sitemap><loc>https://a.example/s1.xml</loc></sitemap><sitemap><loc><![CDATA[https://a.example/s2.xml?a=1&b=2]]></loc><lastmod>x</lastmod></sitemap></sitemapindex>',
    "prefixed": b'<s:urlset xmlns:s="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:i="http://www.google.com/schemas/sitemap-image/1.1"><s:url><s:loc>https://a.example/p</s:loc><i:image><i:loc>https://a.example/i.webp</i:loc></i:image></s:url></s:urlset>',
    "plist": b'<?xml version="1.0"?><!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "x.dtd"><plist><array><string>https://a.example/1.png</string></array></plist>',
    "dtd": b'<!DOCTYPE urlset [<!ENTITY a "b">]><urlset ' + SM + b'><url><loc>&a;</loc></url></urlset>',
    "foreign": b'<urlset ' + SM + b'><url xmlns:v="urn:v"><loc>https://a.example/v.gif</loc><v:video><v:loc>https://x/</v:loc></v:video></url><url/></urlset>',
    "broken": b'<urlset ' + SM + b'><url><loc>https://a.example/1.png</lo></url>',
    "not-sitemap": b'<html><body/></html>',
}
for name, text in xml_lists.items():
    write("link-list-xml", name, text + list_trailer())

configs = {
    "packaged": b'# imgd\nspool = "/var/lib/imgd/spool"\ncache = "/var/cache/imgd"\ndisk-limit = "10G"\nmax-age = "30d"\nconcurrency = 16\nper-host = 4\n',
    "types": b'memory-limit = "256M"\ntimeout = "30s"\nretries = 3\nlog-level = "debug"\nallow-private = true\n',
    "bad-value": b'disk-limit = "ten gigabytes"\n',
    "unknown-key": b'no-such-setting = 1\n',
    "table": b'[network]\nproxy = "http://proxy:3128"\n',
    "strings": b"a = 'literal'\nb = \"\"\"multi\nline\"\"\"\nc = '''raw\\n'''\nd = \"\\u00e9\\t\"\n",
    "numbers": b"a = 1_000\nb = 0x1F\nc = 0o17\nd = 0b101\ne = +1.5e3\nf = inf\ng = nan\nh = 1979-05-27T07:32:00Z\n",
    "arrays": b'a = [1, 2, [3, "x"], ]\nb = { x = 1, y = "z" }\n[[t]]\nk = 1\n[[t]]\nk = 2\n',
    "broken": b'a = "unterminated\nb = [1, 2\n[table\n',
}
for name, text in configs.items():
    write("config", name, text + bytes([0]))
write("config", "flags", b"disk-limit=1G\nconcurrency=4\nmax-age=7d\nbogus=1\n" + bytes([255]))

# Images: every format the validator knows, small, plus damaged variants.
images = {}
with tempfile.TemporaryDirectory() as work:
    def magick(name, *args):
        out = os.path.join(work, name)
        try:
            subprocess.run(["convert", *args, out], check=True, capture_output=True)
            with open(out, "rb") as f:
                images[name] = f.read()
        except (subprocess.CalledProcessError, FileNotFoundError) as error:
            print(f"skipped {name}: {error}", file=sys.stderr)

    base = ["-size", "3x2", "xc:red", "-fill", "blue", "-draw", "point 1,1"]
    for ext in ["png", "gif", "jpg", "webp", "bmp", "tiff", "ico", "avif"]:
        magick("basic." + ext, *base)
    magick("progressive.jpg", "-size", "9x5", "xc:green", "-interlace", "Plane")
    magick("animated.gif", "-delay", "10", "-size", "2x2", "xc:red", "xc:blue")
    magick("lossless.webp", "-size", "2x2", "xc:red", "-define", "webp:lossless=true")
    magick("alpha.webp", "-size", "2x2", "xc:#ff000080")
    magick("msb.tiff", "-size", "2x3", "xc:red", "-endian", "MSB")
    magick("gray.png", "-size", "5x1", "gradient:", "-colorspace", "Gray")
    magick("bmp3.bmp", "-size", "2x2", "xc:red", "-define", "bmp:format=bmp3")
images["basic.svg"] = b'<?xml version="1.0"?>\n<!-- c -->\n<svg xmlns="http://www.w3.org/2000/svg" width="3" height="2" viewBox="0 0 3 2"><rect/></svg>\n'
images["bom.svg"] = b'\xef\xbb\xbf<!DOCTYPE svg>\n<svg width="10px" height="5em"></svg>'
images["html"] = b"<!DOCTYPE html><html><body>not an image</body></html>"
for name, data in list(images.items()):
    write("image", name, data + image_trailer())
    if len(data) > 16 and name.endswith((".png", ".jpg", ".gif", ".webp")):
        write("image", name + ".cut", data[: len(data) * 2 // 3] + image_trailer())
        write("image", name + ".declared-longer", data + image_trailer(length_choice=200, delta=10))
        write("image", name + ".declared-shorter", data + image_trailer(length_choice=130, delta=3))

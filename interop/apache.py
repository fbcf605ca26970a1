#!/usr/bin/env python3
"""Cross-implementation test vectors: Apache Thrift (compiler + Python library) vs thrift-wire.

Apache Thrift is the reference implementation of the Binary, Compact and JSON protocols.
This script builds a fixed set of values of every struct in idl/echo.thrift and
idl/mixed.thrift (plus message envelopes and TApplicationException) with the classes that
`thrift --gen py` generates, and:

  gen [--out FILE]   writes one JSON line per (case, protocol):
                       {"case", "type", "protocol", "exact", "expect", "hex"}
                     protocol is "binary" (strict write), "compact", "json", or, for
                     message cases, "binary-nonstrict" (an old-style header without
                     version word).
                     exact: thrift-wire's encoding of the same value must be
                     byte-identical (false where the bytes legitimately differ: absent
                     default-requiredness fields, which thrift-wire always writes; a map
                     written in non-sorted order; a set in Python's hash order; and in
                     JSON, a binary whose base64 Python pads and thrift-wire, like
                     Apache's C++ and Java, does not, or a string with control bytes that
                     Python writes raw and thrift-wire, like C++ and Java, escapes).
                     expect: "ok"; "missing-required" (the value lacks a required field;
                     decoding must fail); or, in JSON, "unreadable": the value holds a NaN
                     or an infinity, which Python's TJSONProtocol writes as bare `nan` or
                     `inf`, not JSON (no Apache reader, Python's own included, takes it
                     back); thrift-wire must refuse it.
  check FILE         reads thrift-wire's encodings, JSON lines {"case", "protocol", "hex"},
                     decodes each with Apache Thrift and compares it with the value the
                     case describes (doubles by bit pattern); exits 1 naming every mismatch.
  cases              prints the case names, one per line.

Common options:
  --gen-dir DIR      where the generated Python code is (or is to be put): the script runs
                     `thrift --gen py` into DIR unless DIR already holds it. Without it, a
                     temporary directory is used and removed.
  --thrift PATH      the Apache Thrift compiler (default: $THRIFT or `thrift`).

Both the pure-Python protocol classes (TBinaryProtocol, TCompactProtocol, TJSONProtocol)
and, when the C extension `thrift.protocol.fastbinary` is available, the accelerated ones
(Binary and Compact) are used: `gen` fails if they encode a value differently, and `check`
decodes with both. In JSON, doubles are compared by bit pattern except NaNs, which JSON
writes as one name whatever their sign and payload.

Values are described here and, by case name, in crates/thrift-codec/tests/interop.rs; the
two must be kept in step (the Rust test fails on a case name it does not know, and `check`
fails when a case is missing from its input).
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDL = os.path.join(REPO, "idl")
IDL_FILES = ("echo.thrift", "mixed.thrift")

# Filled in by load_generated().
TType = TMessageType = TApplicationException = None
TTransport = TBinaryProtocol = TCompactProtocol = TJSONProtocol = None
echo = mixed = None
PROTOCOLS = {}


def fail(msg):
    print("apache.py: " + msg, file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------------------------------
# Code generation and imports


def generate(gen_dir, thrift, files=IDL_FILES):
    """Runs `thrift --gen py` on the IDLs (files of idl/, each with a Python namespace
    named as the file) into gen_dir, unless it is already there."""
    if all(
        os.path.exists(os.path.join(gen_dir, os.path.splitext(name)[0], "ttypes.py"))
        for name in files
    ):
        return
    os.makedirs(gen_dir, exist_ok=True)
    for name in files:
        cmd = [thrift, "--gen", "py", "-I", IDL, "-out", gen_dir, os.path.join(IDL, name)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError:
            fail("the Apache Thrift compiler `%s` was not found (apt-get install thrift-compiler)" % thrift)
        if res.returncode != 0:
            fail("`%s` failed (%d):\n%s%s" % (" ".join(cmd), res.returncode, res.stdout, res.stderr))


def load_generated(gen_dir):
    global TType, TMessageType, TApplicationException, TTransport, TBinaryProtocol
    global TCompactProtocol, TJSONProtocol, echo, mixed
    try:
        from thrift.Thrift import TType, TMessageType, TApplicationException
        from thrift.transport import TTransport
        from thrift.protocol import TBinaryProtocol, TCompactProtocol, TJSONProtocol
    except ImportError as e:
        fail("the Apache Thrift Python library is missing (pip install thrift): %s" % e)
    sys.path.insert(0, gen_dir)
    import echo.ttypes as echo_ttypes
    import mixed.ttypes as mixed_ttypes

    echo, mixed = echo_ttypes, mixed_ttypes

    def nonstrict(trans):
        return TBinaryProtocol.TBinaryProtocol(trans, strictRead=False, strictWrite=False)

    PROTOCOLS["binary"] = [("pure", TBinaryProtocol.TBinaryProtocol)]
    PROTOCOLS["compact"] = [("pure", TCompactProtocol.TCompactProtocol)]
    PROTOCOLS["binary-nonstrict"] = [("pure", nonstrict)]
    PROTOCOLS["json"] = [("pure", TJSONProtocol.TJSONProtocol)]
    try:
        from thrift.protocol import fastbinary  # noqa: F401

        PROTOCOLS["binary"].append(
            ("accelerated", lambda t: TBinaryProtocol.TBinaryProtocolAccelerated(t, fallback=False))
        )
        PROTOCOLS["compact"].append(
            ("accelerated", lambda t: TCompactProtocol.TCompactProtocolAccelerated(t, fallback=False))
        )
    except ImportError:
        print("apache.py: note: thrift.protocol.fastbinary is not available; "
              "pure-Python protocols only", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# Deterministic data, mirrored in tests/interop.rs

M64 = (1 << 64) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
UNICODE = "ünïcødé — 日本語 — Ελληνικά — עברית — 🎉🦀 — \u0000 — e\u0301"


def lcg(i):
    return (i * 6364136223846793005 + 1442695040888963407) & M64


def s64(u):
    return u - (1 << 64) if u >= 1 << 63 else u


def s32(u):
    u &= 0xFFFFFFFF
    return u - (1 << 32) if u >= 1 << 31 else u


def f64_bits(u):
    return struct.unpack("<d", struct.pack("<Q", u))[0]


def bits_f64(f):
    return struct.unpack("<Q", struct.pack("<d", f))[0]


def big_i32(n):
    return [s32(lcg(i) >> 32) for i in range(n)]


def big_i64(n):
    return [s64(lcg(i)) for i in range(n)]


def big_f64(n):
    # Arbitrary bit patterns: includes subnormals and a few NaNs with payloads.
    return [f64_bits(lcg(3 * i + 1)) for i in range(n)]


def blob(n):
    return bytes((i * 13) & 0xFF for i in range(n))


class SortedSet(set):
    """A set that iterates in ascending order, so that the generated `write` (which does
    `for x in self.tags`) emits it the way thrift-wire's BTreeSet does."""

    def __iter__(self):
        return iter(sorted(set.__iter__(self)))


def sorted_map(pairs):
    """A dict in ascending key order (by UTF-8 bytes, as thrift-wire's BTreeMap)."""
    return dict(sorted(pairs, key=lambda kv: kv[0].encode("utf-8")))


# ---------------------------------------------------------------------------------------
# The cases


class Case:
    def __init__(self, name, value, header=None, exact=True, from_rust=None, expect="ok"):
        self.name = name
        self.value = value
        # (name, message type, seqid) for message cases.
        self.header = header
        self.exact = exact
        # What decoding thrift-wire's encoding yields, where it differs from `value`
        # (thrift-wire writes absent default-requiredness fields with their defaults).
        self.from_rust = value if from_rust is None else from_rust
        self.expect = expect

    @property
    def type_name(self):
        return type(self.value).__name__

    def type_label(self):
        return ("message:" if self.header else "") + self.type_name


def ids(ids32, ids64, scores, blob_):
    return echo.Ids(ids32=ids32, ids64=ids64, scores=scores, blob=blob_)


def empty_ids():
    return ids([], [], [], b"")


def mixed_value(**kw):
    # Every default-requiredness field set, so that the bytes match thrift-wire's.
    fields = dict(
        id=0, name="", flag=False, tiny=0, small=0, count=0, ratio=0.0, requests=[],
        counters={}, tags=SortedSet(), labels=[], payload=None, ids=empty_ids(),
    )
    fields.update(kw)
    return mixed.Mixed(**fields)


def cases():
    R, Resp, Ano, MyTest = echo.Request, echo.Response, echo.Ano, echo.MyTest
    EchoError, AppEx, MT = echo.EchoError, TApplicationException, TMessageType
    inf, nan = float("inf"), float("nan")
    out = []

    def add(*args, **kw):
        out.append(Case(*args, **kw))

    # Request / Response: required strings.
    add("request_basic", R(action="echo", msg="hello"))
    add("request_empty", R(action="", msg=""))
    add("request_unicode", R(action="ünïcødé", msg=UNICODE))
    # 70,000 bytes: a 3-byte varint length, and above thrift-wire's zero-copy threshold.
    add("request_long", R(action="echo", msg="abcdefghijklmnop" * 4375))
    # Every character JSON escapes by name, and `/`, which no Apache writer escapes.
    add("request_escapes", R(action='q"\\/', msg="\b\f\n\r\t"))
    add("request_missing_msg", R(action="echo"), expect="missing-required")
    add("response_basic", Resp(action="echo", msg="world"))
    add("response_unicode", Resp(action="🦀", msg=UNICODE))

    # Ano: i64 zigzag/varint and big-endian edges.
    for name, num in [("zero", 0), ("one", 1), ("neg_one", -1), ("min", I64_MIN), ("max", I64_MAX)]:
        add("ano_" + name, Ano(num=num))
    add("ano_absent", Ano(), exact=False, from_rust=Ano(num=0))

    # MyTest: nested struct, list<i64>.
    add("my_test_basic", MyTest(num=1, ano=Ano(num=-1), nums=[1, 2]))
    add("my_test_empty_list", MyTest(num=-42, ano=Ano(num=7), nums=[]))
    edges = [0, 1, -1, 63, 64, -64, -65, 8191, 8192, -8193, I32_MAX, I32_MAX + 1, I32_MIN,
             I32_MIN - 1, 1 << 53, 1 << 62, -(1 << 62), I64_MAX, I64_MIN]
    add("my_test_varint_edges", MyTest(num=I64_MIN, ano=Ano(num=I64_MAX), nums=edges))
    # 14 elements: the last short compact list header; 15: the first long one.
    add("my_test_list_14", MyTest(num=14, ano=Ano(num=0), nums=list(range(14))))
    add("my_test_list_15", MyTest(num=15, ano=Ano(num=0), nums=list(range(15))))
    add("my_test_big", MyTest(num=1 << 40, ano=Ano(num=I64_MIN), nums=big_i64(20000)))
    add("my_test_absent", MyTest(num=5), exact=False,
        from_rust=MyTest(num=5, ano=Ano(num=0), nums=[]))

    # Ids: list<i32>, list<i64>, list<double>, binary.
    add("ids_basic", ids([1, -2, 3], [-(1 << 40), 0, 1 << 40], [0.5, -1.25, 3.0], b"\x00\x01\xfe\xff"))
    add("ids_empty", empty_ids())
    add("ids_edges", ids(
        [I32_MIN, I32_MAX, 0, -1, 1],
        [I64_MIN, I64_MAX, 0, -1, 1],
        [0.0, -0.0, inf, -inf, nan, 2.2250738585072014e-308, 5e-324, -5e-324,
         1.7976931348623157e308, -1.7976931348623157e308, math.pi, 1e300, 0.1],
        bytes(range(256)),
    ))
    add("ids_nan_payloads", ids([], [], [f64_bits(b) for b in (
        0x7FF0000000000001, 0xFFF8000000000000, 0x7FF8DEAD00000000, 0xFFFFFFFFFFFFFFFF,
        0x7FF4000000000000)], b""))
    add("ids_big", ids(big_i32(20000), big_i64(20000), big_f64(20000), blob(10000)))
    # 20,000 arbitrary finite doubles and a binary of 3n bytes: byte-comparable in JSON too
    # (printf's %.17g digits; base64 that needs no padding).
    add("ids_finite_doubles", ids([], [], [f for f in big_f64(20000) if math.isfinite(f)],
                                  blob(3000)))
    add("ids_absent", echo.Ids(), exact=False, from_rust=empty_ids())

    # EchoError: an exception struct.
    add("echo_error_basic", EchoError(code=42, message="boom"))
    add("echo_error_edges", EchoError(code=I32_MIN, message=UNICODE))
    add("echo_error_empty", EchoError(code=0, message=""))

    # Mixed: every base type, containers, optional binary.
    small_ids = ids([7, -7], [1 << 33], [-0.0, 2.5], b"blob")
    add("mixed_full", mixed_value(
        id=1 << 40, name="mixed-value-é", flag=True, tiny=-3, small=30000, count=-70000,
        ratio=0.125, requests=[R(action="echo", msg="one"), R(action="echo", msg="two")],
        counters=sorted_map([("a", 1), ("b", -2), ("c", 1 << 40)]),
        tags=SortedSet([1, 2, 3, 100]), labels=["x", "y", "z"], payload=b"\x00payload\xff",
        ids=small_ids,
    ))
    add("mixed_empty_containers", mixed_value())
    add("mixed_extremes", mixed_value(
        id=I64_MAX, name=UNICODE, flag=True, tiny=-128, small=-32768, count=I32_MAX,
        ratio=-0.0, requests=[R(action="", msg=""), R(action=UNICODE, msg="x")],
        counters=sorted_map([("", I64_MIN), ("a", -1), ("é", I64_MAX), ("🦀", 0), ("z", 1)]),
        tags=SortedSet([I32_MIN, -5, -1, 0, 1, I32_MAX]), labels=["", UNICODE, "z"],
        payload=b"", ids=ids([I32_MIN], [I64_MIN], [inf], b""),
    ))
    add("mixed_nan", mixed_value(
        id=I64_MIN, name="nan", flag=True, tiny=127, small=32767, count=I32_MIN, ratio=nan,
        tags=SortedSet([-1]), labels=["only"],
    ))
    add("mixed_big", mixed_value(
        id=123456789, name="mixed-big", flag=True, tiny=42, small=-1234, count=987654, ratio=1.0 / 3.0,
        requests=[R(action="echo", msg=chr(ord("a") + i % 26) * 512) for i in range(16)],
        counters=sorted_map([("counter-%03d" % i, s64(lcg(i))) for i in range(64)]),
        tags=SortedSet(big_i32(256)),
        labels=["label-%d-ü" % i for i in range(64)],
        payload=blob(3000),
        ids=ids(big_i32(128), big_i64(128), big_f64(128), blob(512)),
    ))
    # Not byte-comparable: Python writes a set in hash order and a dict in insertion order;
    # thrift-wire (BTreeSet/BTreeMap) writes ascending. Compared by decoding only.
    add("mixed_set_hash_order", mixed_value(
        id=1, tags={I32_MAX, -1, 100000, -100000, 3, 1 << 20, -7, 0}), exact=False)
    add("mixed_map_insertion_order", mixed_value(
        id=2, counters={"z": 1, "y": 2, "é": 3, "a": 4, "": 5}), exact=False)
    add("mixed_flag_only", mixed.Mixed(flag=True), exact=False, from_rust=mixed_value(flag=True))

    # TApplicationException.
    add("app_exception_unknown", AppEx(type=AppEx.UNKNOWN, message=""))
    add("app_exception_unknown_method", AppEx(type=AppEx.UNKNOWN_METHOD, message="Unknown method 'frobnicate'"))
    add("app_exception_other_kind", AppEx(type=99, message=UNICODE))
    add("app_exception_no_message", AppEx(type=AppEx.INTERNAL_ERROR), exact=False,
        from_rust=AppEx(type=AppEx.INTERNAL_ERROR, message=""))

    # Message envelopes: header + body.
    add("message_call", R(action="echo", msg="hi"), header=("echo", MT.CALL, 1))
    add("message_reply", Resp(action="echo", msg="hi"), header=("echo", MT.REPLY, 1))
    add("message_oneway", R(action="notify", msg="event"), header=("notify", MT.ONEWAY, 0))
    add("message_exception", AppEx(type=AppEx.UNKNOWN_METHOD, message="Unknown method echo2"),
        header=("echo2", MT.EXCEPTION, 2))
    add("message_seq_neg_one", R(action="echo", msg="hi"), header=("echo", MT.CALL, -1))
    add("message_seq_min", Resp(action="echo", msg="hi"), header=("echo", MT.REPLY, I32_MIN))
    add("message_seq_max", R(action="echo", msg="hi"), header=("echo", MT.CALL, I32_MAX))
    add("message_seq_varint", R(action="e", msg=""), header=("notify", MT.ONEWAY, 0x12345678))
    add("message_unicode_name", AppEx(type=AppEx.INTERNAL_ERROR, message=UNICODE),
        header=("échо_🦀", MT.EXCEPTION, 1000))
    add("message_empty_name", R(action="", msg=""), header=("", MT.CALL, 42))

    names = [c.name for c in out]
    assert len(names) == len(set(names)), "duplicate case names"
    return out


# ---------------------------------------------------------------------------------------
# JSON: what Python's TJSONProtocol writes differently from thrift-wire (and Apache C++)


def values(v):
    """Every value inside v, v included (struct fields, container elements, map keys)."""
    yield v
    if isinstance(v, (list, set, frozenset)):
        for x in v:
            yield from values(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from values(k)
            yield from values(x)
    elif isinstance(v, TApplicationException):
        yield from values(v.message)
    elif hasattr(v, "thrift_spec"):
        for spec in v.thrift_spec:
            if spec:
                yield from values(getattr(v, spec[2]))


# Python escapes these control characters by name, as thrift-wire does; it writes the
# others raw, where thrift-wire (like C++ and Java) writes \u00xx.
NAMED_ESCAPES = set("\b\f\n\r\t")


def json_exact(value):
    """Whether Python's JSON encoding of value is the canonical one thrift-wire writes."""
    for x in values(value):
        if isinstance(x, (bytes, bytearray)) and len(x) % 3:
            return False  # Python pads base64
        if isinstance(x, str) and any(ord(c) < 0x20 and c not in NAMED_ESCAPES for c in x):
            return False  # Python writes control bytes raw
    return True


def has_nonfinite(value):
    return any(isinstance(x, float) and not math.isfinite(x) for x in values(value))


def line_for(case, proto):
    """(exact, expect) of a case's line in protocol proto."""
    if proto != "json":
        return case.exact, case.expect
    exact = case.exact and json_exact(case.value)
    if case.expect == "ok" and has_nonfinite(case.value):
        return False, "unreadable"
    return exact, case.expect


# ---------------------------------------------------------------------------------------
# Encoding, decoding, comparison


def encode(case, make_protocol):
    trans = TTransport.TMemoryBuffer()
    prot = make_protocol(trans)
    if case.header:
        prot.writeMessageBegin(*case.header)
    case.value.write(prot)
    if case.header:
        prot.writeMessageEnd()
    return trans.getvalue()


def decode(data, cls, with_header, make_protocol):
    """Returns (header or None, value, trailing byte count)."""
    trans = TTransport.TMemoryBuffer(data)
    prot = make_protocol(trans)
    header = prot.readMessageBegin() if with_header else None
    value = cls()
    # Generated exceptions are immutable: their `read` is a classmethod that returns a new
    # instance; structs' `read` fills in `value` and returns None.
    ret = value.read(prot)
    if ret is not None:
        value = ret
    if with_header:
        prot.readMessageEnd()
    return header, value, len(data) - trans._buffer.tell()


def lenient(prot):
    """`prot` with readString returning bytes (for skipping non-UTF-8 binaries)."""
    prot.readString = prot.readBinary
    return prot


def describe(v):
    if isinstance(v, float):
        return "%r (bits %016x)" % (v, bits_f64(v))
    r = repr(v)
    return r if len(r) <= 200 else r[:200] + "..."


def diff(a, b, path, any_nan=False):
    """None when a and b are the same value (doubles by bit pattern; with any_nan, every NaN
    the same), else where they differ."""
    if isinstance(a, float) or isinstance(b, float):
        if any_nan and type(a) is type(b) and math.isnan(a) and math.isnan(b):
            return None
        if type(a) is not type(b) or bits_f64(a) != bits_f64(b):
            return "%s: expected %s, got %s" % (path, describe(a), describe(b))
        return None
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return "%s: expected a list of %d, got %s" % (
                path, len(a), ("a list of %d" % len(b)) if isinstance(b, list) else describe(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, "%s[%d]" % (path, i), any_nan)
            if d:
                return d
        return None
    if isinstance(a, (set, frozenset)):
        if not isinstance(b, (set, frozenset)) or set(a) != set(b):
            return "%s: expected the set %s, got %s" % (path, describe(sorted(a)), describe(b))
        return None
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return "%s: expected keys %s, got %s" % (path, describe(sorted(a)), describe(b))
        for k in a:
            d = diff(a[k], b[k], "%s[%r]" % (path, k), any_nan)
            if d:
                return d
        return None
    if isinstance(a, TApplicationException):
        fields = ["message", "type"]
    elif hasattr(a, "thrift_spec"):
        fields = [spec[2] for spec in a.thrift_spec if spec]
    else:
        if type(a) is not type(b) or a != b:
            return "%s: expected %s, got %s" % (path, describe(a), describe(b))
        return None
    if type(a) is not type(b):
        return "%s: expected a %s, got %s" % (path, type(a).__name__, describe(b))
    for f in fields:
        d = diff(getattr(a, f), getattr(b, f), path + "." + f, any_nan)
        if d:
            return d
    return None


def hex_diff(expected, got):
    n = next((i for i, (x, y) in enumerate(zip(expected, got)) if x != y), min(len(expected), len(got)))
    lo = max(0, n - 16)
    return "lengths %d (Apache) vs %d (thrift-wire); first difference at byte %d:\n" \
           "      Apache: ...%s\n" \
           "thrift-wire: ...%s" % (len(expected), len(got), n, expected[lo:n + 24].hex(), got[lo:n + 24].hex())


# ---------------------------------------------------------------------------------------
# Commands


def cmd_gen(out):
    errors = []
    for case in cases():
        protocols = ["binary", "compact", "json"] + (["binary-nonstrict"] if case.header else [])
        for proto in protocols:
            exact, expect = line_for(case, proto)
            encodings = [(impl, encode(case, make)) for impl, make in PROTOCOLS[proto]]
            base = encodings[0][1]
            for impl, data in encodings[1:]:
                if data != base:
                    # Only unordered containers may legitimately differ between the two.
                    if case.exact:
                        errors.append("%s/%s: Apache's pure and %s encoders disagree: %s" % (
                            case.name, proto, impl, hex_diff(base, data)))
            # Sanity: Apache reads its own bytes back (pure decoder), where it can.
            if expect == "ok":
                _, back, left = decode(base, type(case.value), case.header, PROTOCOLS[proto][0][1])
                d = diff(case.value, back, case.name)
                if d or left:
                    errors.append("%s/%s: Apache does not read its own encoding back: %s" % (
                        case.name, proto, d or "%d trailing bytes" % left))
            out.write(json.dumps({
                "case": case.name, "type": case.type_label(), "protocol": proto,
                "exact": exact, "expect": expect, "hex": base.hex(),
            }) + "\n")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)


def cmd_check(path):
    by_name = {c.name: c for c in cases()}
    checked_protocols = ("binary", "compact", "json")
    wanted = {(c.name, p) for c in by_name.values() if c.expect == "ok" for p in checked_protocols}
    seen = set()
    errors = []
    notes = set()
    checked = 0
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            name, proto = rec["case"], rec["protocol"]
            where = "%s/%s (line %d)" % (name, proto, lineno)
            case = by_name.get(name)
            if case is None or proto not in checked_protocols:
                errors.append("%s: unknown case or protocol" % where)
                continue
            if (name, proto) in seen:
                errors.append("%s: duplicate" % where)
            seen.add((name, proto))
            data = bytes.fromhex(rec["hex"])
            exact, _ = line_for(case, proto)
            # JSON has one NaN: sign and payload do not survive it.
            any_nan = proto == "json"
            if exact:
                own = encode(case, PROTOCOLS[proto][0][1])
                if own != data:
                    errors.append("%s: bytes differ from Apache's: %s" % (where, hex_diff(own, data)))
            for impl, make in PROTOCOLS[proto]:
                label = "%s [Apache %s decoder]" % (where, impl)
                try:
                    header, value, left = decode(data, type(case.value), case.header, make)
                except Exception as e:  # noqa: BLE001 - report whatever Apache raised
                    errors.append("%s: Apache failed to decode it: %s: %s" % (label, type(e).__name__, e))
                    continue
                if left:
                    errors.append("%s: %d trailing bytes" % (label, left))
                if case.header and tuple(header) != tuple(case.header):
                    errors.append("%s: header expected %r, got %r" % (label, case.header, header))
                d = diff(case.from_rust, value, name, any_nan)
                if d:
                    errors.append("%s: %s" % (label, d))
                # Apache skipping every field type: read a Mixed as an Ano (field 1: i64).
                if isinstance(case.value, mixed.Mixed):
                    try:
                        _, ano, left = decode(data, echo.Ano, False, make)
                    except UnicodeDecodeError:
                        # Apache's pure-Python TProtocolBase.skip(STRING) calls readString,
                        # which decodes UTF-8, so it cannot skip a `binary` that is not
                        # UTF-8. Skip with a protocol whose readString returns the bytes.
                        notes.add("Apache's pure-Python skip() fails on non-UTF-8 `binary` "
                                  "fields (%s); skipped with readString = readBinary instead" % name)
                        _, ano, left = decode(data, echo.Ano, False, lambda t: lenient(make(t)))
                    if ano.num != case.from_rust.id or left:
                        errors.append("%s: read as Ano (skipping fields 2-13): num %r, %d trailing bytes" % (
                            label, ano.num, left))
            checked += 1
    for name, proto in sorted(wanted - seen):
        errors.append("%s/%s: missing from %s" % (name, proto, path))
    if errors:
        print("Apache Thrift disagrees with thrift-wire on %d point(s):" % len(errors), file=sys.stderr)
        print("\n".join("  " + e for e in errors), file=sys.stderr)
        sys.exit(1)
    for note in sorted(notes):
        print("apache.py check: note: " + note)
    impls = ", ".join(sorted({impl for v in PROTOCOLS.values() for impl, _ in v}))
    print("apache.py check: %d encodings decoded and matched (%s decoders)" % (checked, impls))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["gen", "check", "cases"])
    ap.add_argument("file", nargs="?", help="check: thrift-wire's encodings (JSON lines)")
    ap.add_argument("--out", help="gen: write here instead of stdout")
    ap.add_argument("--gen-dir", help="generated Python code (created if absent)")
    ap.add_argument("--thrift", default=os.environ.get("THRIFT", "thrift"), help="the Thrift compiler")
    args = ap.parse_args()
    if args.command == "check" and not args.file:
        ap.error("check needs a FILE")

    tmp = None
    gen_dir = args.gen_dir
    if gen_dir is None:
        tmp = gen_dir = tempfile.mkdtemp(prefix="thrift-interop-py-")
    try:
        generate(gen_dir, args.thrift)
        load_generated(gen_dir)
        if args.command == "cases":
            for c in cases():
                print(c.name)
        elif args.command == "gen":
            if args.out:
                with open(args.out, "w") as out:
                    cmd_gen(out)
            else:
                cmd_gen(sys.stdout)
        else:
            cmd_check(args.file)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cross-implementation test vectors for codegen's test IDLs: Apache Thrift vs our generated code.

The five test IDLs of codegen (crates/codegen/tests/idl/{base,shapes,services,includes,
comments}.thrift) are compiled with `thrift --gen py`; this script builds a fixed set of
values of a representative set of their structs, unions, exceptions and service
argument/result structs with the generated Python classes, and:

  gen [--out FILE]   writes one JSON line per (case, protocol):
                       {"case", "type", "protocol", "exact", "expect", "hex"}
                     protocol is "binary" (strict) or "compact". exact: our generated
                     code's encoding of the same value must be byte-identical (false where
                     the bytes legitimately differ: a default-requiredness field left
                     None, which Apache Python omits and our code always writes).
                     expect is always "ok".
  check FILE         reads our encodings, JSON lines {"case", "protocol", "hex"}, decodes
                     each with Apache Thrift and compares it with the value the case
                     describes; exits 1 naming every mismatch.
  cases              prints the case names, one per line.
  patches            prints the changes made to the IDLs for Apache's compiler.

Apache Thrift 0.17's compiler cannot compile the test IDLs unchanged. The script copies
them into the generation directory and applies these wire-neutral changes (each must
apply exactly once, else the script fails, so that a changed IDL is noticed):

  * base.thrift:     drops `const Range UNIT` (a struct constant referring to another
                     struct constant: "type error: const "UNIT.lo" was declared as
                     struct/xception").
  * includes.thrift: drops `const list<base.Point> PATH` (same limitation).
  * shapes.thrift:   renames field 3 of Keywords `async` -> `async_` (a reserved word in
                     Apache's grammar: syntax error) and field 4 `self` -> `self_`
                     (accepted by the compiler, but the generated Python
                     `__init__(self, ..., self=None)` is a SyntaxError). Field names are
                     not on the wire.
  * shapes.thrift:   Rect field 12 `uuid` -> `binary`, because the 0.17 compiler does not
                     know `uuid` ("Type "uuid" not defined"); the generated Python is then
                     patched back to uuid (TType.UUID, readUuid/writeUuid, which the 0.25
                     Python library has) so the field is tested on the wire as a uuid.
  * comments.thrift: `\\u00e9` and `\\uD83D\\uDE00` in Quoting.dq's default are replaced by
                     the characters they denote (Apache's lexer: "Bad escape character").

Values are described here and, by case name, in crates/codegen-check/tests/interop.rs;
the two must be kept in step.

Common options:
  --gen-dir DIR      where the generated Python code is (or is to be put).
  --thrift PATH      the Apache Thrift compiler (default: $THRIFT or `thrift`).

Only the pure-Python protocols (TBinaryProtocol, TCompactProtocol) are used.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDL = os.path.join(REPO, "crates", "codegen", "tests", "idl")
IDL_FILES = ("base.thrift", "shapes.thrift", "services.thrift", "includes.thrift", "comments.thrift")

# (file, old, new, why): textual, wire-neutral changes for Apache's 0.17 compiler.
IDL_PATCHES = [
    ("base.thrift", 'const Range UNIT = {"lo": ORIGIN, "hi": {"x": 1, "y": LIMIT}}', "",
     "struct constant referring to a struct constant is rejected"),
    ("includes.thrift", 'const list<base.Point> PATH = [base.ORIGIN, {"x": base.MAX_ITEMS, "y": 2}]', "",
     "struct constant referring to a struct constant is rejected"),
    ("shapes.thrift", "3: bool async,", "3: bool async_,",
     "`async` is reserved in Apache's grammar"),
    ("shapes.thrift", '4: string self (rust.name = "self_"),', '4: string self_ (rust.name = "self_"),',
     "a field named `self` makes Apache's generated Python a SyntaxError"),
    ("shapes.thrift", "12: uuid id,", "12: binary id,",
     "the 0.17 compiler lacks `uuid`; patched back to uuid in the generated Python"),
    ("comments.thrift", "\\u00e9", "\u00e9", "Apache's lexer rejects \\u escapes"),
    ("comments.thrift", "\\uD83D\\uDE00", "\U0001F600", "Apache's lexer rejects \\u escapes"),
]

# Generated-code patches that turn Rect.id back into a uuid.
PY_PATCHES = [
    ("shapes/ttypes.py", "(12, TType.STRING, 'id', 'BINARY', None, ),", "(12, TType.UUID, 'id', None, None, ),"),
    ("shapes/ttypes.py",
     "if ftype == TType.STRING:\n                    self.id = iprot.readBinary()",
     "if ftype == TType.UUID:\n                    self.id = iprot.readUuid()"),
    ("shapes/ttypes.py",
     "oprot.writeFieldBegin('id', TType.STRING, 12)\n            oprot.writeBinary(self.id)",
     "oprot.writeFieldBegin('id', TType.UUID, 12)\n            oprot.writeUuid(self.id)"),
]

# Filled in by load_generated().
TTransport = TBinaryProtocol = TCompactProtocol = TApplicationException = None
base = shapes = services_store = includes = includes_events = comments = comments_doc = None
PROTOCOLS = {}


def fail(msg):
    print("apache_idls.py: " + msg, file=sys.stderr)
    sys.exit(2)


def replace_once(text, old, new, where):
    n = text.count(old)
    if n != 1:
        fail("%s: expected exactly one occurrence of %r, found %d (the IDL or Apache's "
             "generator changed: update the patches)" % (where, old, n))
    return text.replace(old, new)


# ---------------------------------------------------------------------------------------
# Code generation and imports


def generate(gen_dir, thrift):
    """Copies and patches the IDLs, runs `thrift --gen py` on them into gen_dir, patches
    the output; unless gen_dir already holds it."""
    marker = os.path.join(gen_dir, ".complete")
    if os.path.exists(marker):
        return
    idl_dir = os.path.join(gen_dir, "idl")
    os.makedirs(idl_dir, exist_ok=True)
    texts = {}
    for name in IDL_FILES:
        with open(os.path.join(IDL, name), encoding="utf-8") as f:
            texts[name] = f.read()
    for name, old, new, _ in IDL_PATCHES:
        texts[name] = replace_once(texts[name], old, new, name)
    for name, text in texts.items():
        with open(os.path.join(idl_dir, name), "w", encoding="utf-8") as f:
            f.write(text)
    for name in IDL_FILES:
        cmd = [thrift, "--gen", "py", "-I", idl_dir, "-out", gen_dir, os.path.join(idl_dir, name)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError:
            fail("the Apache Thrift compiler `%s` was not found (apt-get install thrift-compiler)" % thrift)
        if res.returncode != 0:
            fail("`%s` failed (%d):\n%s%s" % (" ".join(cmd), res.returncode, res.stdout, res.stderr))
    for rel, old, new in PY_PATCHES:
        path = os.path.join(gen_dir, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text = replace_once(text, old, new, rel)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    open(marker, "w").close()


def load_generated(gen_dir):
    global TTransport, TBinaryProtocol, TCompactProtocol, TApplicationException
    global base, shapes, services_store, includes, includes_events, comments, comments_doc
    try:
        from thrift.Thrift import TApplicationException
        from thrift.transport import TTransport
        from thrift.protocol import TBinaryProtocol, TCompactProtocol
    except ImportError as e:
        fail("the Apache Thrift Python library is missing (pip install thrift): %s" % e)
    sys.path.insert(0, gen_dir)
    import base.types.ttypes as base_
    import shapes.ttypes as shapes_
    import services.Store as store_
    import includes.ttypes as includes_
    import includes.Events as events_
    import comments.all.ttypes as comments_
    import comments.all.Doc as doc_

    base, shapes, services_store = base_, shapes_, store_
    includes, includes_events, comments, comments_doc = includes_, events_, comments_, doc_
    PROTOCOLS["binary"] = TBinaryProtocol.TBinaryProtocol
    PROTOCOLS["compact"] = TCompactProtocol.TCompactProtocol


# ---------------------------------------------------------------------------------------
# Helpers, mirrored in tests/interop.rs

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
UUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
ZERO_UUID = uuid.UUID(int=0)


class SortedSet(set):
    """A set that iterates in ascending order (strings by UTF-8 bytes), as our BTreeSet."""

    def __iter__(self):
        return iter(sorted(set.__iter__(self), key=sort_key))


def sort_key(k):
    return k.encode("utf-8") if isinstance(k, str) else k


def sorted_map(pairs):
    """A dict in ascending key order, as our BTreeMap."""
    return dict(sorted(pairs, key=lambda kv: sort_key(kv[0])))


class Case:
    def __init__(self, name, label, value, exact=True, from_rust=None):
        self.name = name
        self.label = label
        self.value = value
        self.exact = exact
        # What decoding our encoding yields, where it differs from `value` (our code
        # writes default-requiredness fields that Apache Python leaves out when None).
        self.from_rust = value if from_rust is None else from_rust


def rect(**kw):
    # Every default-requiredness field set, so that the bytes match ours.
    fields = dict(width=0, height=0, scale=1.0, visible=True, tags=[], props={}, layer=-1,
                  z=0, flags=15, id=ZERO_UUID, kind="rect", created_at=0)
    fields.update(kw)
    return shapes.Rect(**fields)


def leaf(value):
    return shapes.TreeNode(value=value, children=[])


def cases():
    S, B = shapes, base
    out = []

    def add(*args, **kw):
        out.append(Case(*args, **kw))

    # base
    add("point_basic", "base.Point", B.Point(x=1, y=-2))
    add("point_defaults", "base.Point", B.Point())
    add("range_basic", "base.Range", B.Range(lo=B.Point(x=-5, y=-6), hi=B.Point(x=I32_MAX, y=I32_MIN)))

    # shapes.Rect
    add("rect_required_only", "shapes.Rect", rect(width=3, height=4))
    add("rect_full", "shapes.Rect", rect(
        width=I32_MAX, height=I32_MIN, label="label-é", scale=-0.0, visible=False,
        tags=["b", "a", ""], props=sorted_map([("z", 1), ("a", -1), ("é", 2)]),
        thumbnail=b"\x00\xff\x80thumb", layer=-128, z=-32768, flags=127, id=UUID,
        kind="", created_at=I64_MIN))
    add("rect_absent_defaults", "shapes.Rect", S.Rect(width=1, height=2), exact=False,
        from_rust=rect(width=1, height=2))

    # shapes.Circle
    add("circle_basic", "shapes.Circle", S.Circle(radius=2.25))
    add("circle_default", "shapes.Circle", S.Circle())

    # shapes.Shape (a union)
    add("shape_rect", "shapes.Shape", S.Shape(rect=rect(width=5, height=6, label="r")))
    add("shape_circle", "shapes.Shape", S.Shape(circle=S.Circle(radius=1.5)))
    add("shape_group", "shapes.Shape", S.Shape(group=[
        S.Shape(circle=S.Circle(radius=0.5)),
        S.Shape(group=[]),
        S.Shape(group=[S.Shape(rect=rect(width=1, height=1))]),
    ]))

    # shapes.TreeNode, LinkedList (recursion)
    add("tree_node_nested", "shapes.TreeNode", S.TreeNode(
        value=1,
        children=[leaf(2), S.TreeNode(value=3, children=[leaf(4), leaf(-5)])],
        parent=S.TreeNode(value=0, children=[], parent=leaf(I64_MAX)),
    ))
    add("tree_node_leaf", "shapes.TreeNode", leaf(I64_MIN))
    add("linked_list_3", "shapes.LinkedList", S.LinkedList(
        head=1, tail=S.LinkedList(head=2, tail=S.LinkedList(head=3))))

    # exceptions
    add("not_found_basic", "shapes.NotFound", S.NotFound(key="missing", code=404))
    add("not_found_custom", "shapes.NotFound", S.NotFound(key="", code=-1))
    add("invalid_fields", "shapes.Invalid", S.Invalid(reason="bad", fields=["a", "b"]))
    add("invalid_reason_only", "shapes.Invalid", S.Invalid(reason="why"))

    # shapes.Keywords (field names that are keywords)
    add("keywords_all", "shapes.Keywords", S.Keywords(
        type="t", match=7, async_=True, self_="me", Result="ok", fn=S.Empty()))
    add("keywords_no_result", "shapes.Keywords", S.Keywords(
        type="", match=-1, async_=False, self_="", fn=S.Empty()))

    # shapes.NoIds (implicit ids -1, -2, -3): both sides write fields in ascending id
    # order (-3, -2, -1), so Compact uses short delta headers between them.
    add("no_ids_flag", "shapes.NoIds", S.NoIds(name="n", count=3, flag=True))
    add("no_ids_no_flag", "shapes.NoIds", S.NoIds(name="", count=-3))

    # shapes.Annotated (annotated containers)
    add("annotated_full", "shapes.Annotated", S.Annotated(
        ids=[3, 1, 2], names=SortedSet(["b", "a", "é"]),
        index=sorted_map([(2, "two"), (-1, "minus one")]), small="s", ts=1 << 40,
        legacy_map=sorted_map([(1, 10), (0, 0)]), legacy_set=SortedSet([5, -5]),
        legacy_list=[9, 8],
        deep=[sorted_map([("x", SortedSet([3, 1])), ("a", SortedSet())]), {}]))
    add("annotated_empty", "shapes.Annotated", S.Annotated(
        ids=[], names=SortedSet(), index={}, small="", ts=0, legacy_map={},
        legacy_set=SortedSet(), legacy_list=[], deep=[]))

    # includes.Event (types from included files)
    add("event_full", "includes.Event", includes.Event(
        at=1700000000000, status=B.Status.ACTIVE,
        marks=sorted_map([(B.Color.BLUE, []), (B.Color.RED, [B.Point(x=1, y=2), B.Point(x=0, y=0)])]),
        shape=S.Shape(circle=S.Circle(radius=3.0)), ids=[2, 3, 5]))
    add("event_unknown_enum", "includes.Event", includes.Event(
        at=-1, status=7, marks={}, shape=S.Shape(group=[]), ids=[]))

    # comments (string and number literals as defaults)
    add("quoting_defaults", "comments.Quoting", comments.Quoting())
    add("numbers_defaults", "comments.Numbers", comments.Numbers())
    add("numbers_custom", "comments.Numbers", comments.Numbers(
        hex=-1, neg_hex=I64_MAX, exp=-0.0, neg_exp=1e-300, frac=float("inf"), plus=-1.5,
        plus_int=I32_MIN, big=5e-324))
    add("inline_basic", "comments.Inline", comments.Inline(x=42))
    add("doc_d_args", "comments.Doc.d_args", comments_doc.d_args(x=1, y=2))

    # services: argument and result structs
    St = services_store
    add("store_get_args", "services.Store.get_args", St.get_args(key="k"))
    add("store_get_result_success", "services.Store.get_result",
        St.get_result(success=S.Shape(circle=S.Circle(radius=0.25))))
    add("store_get_result_nf", "services.Store.get_result",
        St.get_result(nf=S.NotFound(key="k", code=404)))
    add("store_get_result_bad", "services.Store.get_result",
        St.get_result(bad=S.Invalid(reason="no", fields=[])))
    add("store_put_args", "services.Store.put_args",
        St.put_args(key="k", value=S.Shape(rect=rect(width=2, height=3))))
    add("store_exists_args", "services.Store.exists_args", St.exists_args(key="key"))
    add("store_exists_result", "services.Store.exists_result", St.exists_result(success=False))
    add("store_stats_result", "services.Store.stats_result",
        St.stats_result(success=sorted_map([("b", 2), ("a", I64_MIN)])))
    add("events_since_result", "includes.Events.since_result", includes_events.since_result(
        success=[includes.Event(at=5, status=B.Status.INACTIVE, marks={},
                                shape=S.Shape(circle=S.Circle()), ids=[])]))
    add("events_since_result_nf", "includes.Events.since_result",
        includes_events.since_result(nf=S.NotFound(key="since", code=1)))

    names = [c.name for c in out]
    assert len(names) == len(set(names)), "duplicate case names"
    return out


# ---------------------------------------------------------------------------------------
# Encoding, decoding, comparison


def encode(value, make_protocol):
    trans = TTransport.TMemoryBuffer()
    value.write(make_protocol(trans))
    return trans.getvalue()


def decode(data, cls, make_protocol):
    """Returns (value, trailing byte count)."""
    trans = TTransport.TMemoryBuffer(data)
    prot = make_protocol(trans)
    value = cls()
    # Generated exceptions may be immutable, their `read` a classmethod returning a new
    # instance; structs' `read` fills in `value` and returns None.
    ret = value.read(prot)
    if ret is not None:
        value = ret
    return value, len(data) - trans._buffer.tell()


def describe(v):
    r = repr(v)
    return r if len(r) <= 200 else r[:200] + "..."


def diff(a, b, path):
    """None when a and b are the same value (doubles by repr, so -0.0 != 0.0), else where."""
    if isinstance(a, float) or isinstance(b, float):
        if type(a) is not type(b) or repr(a) != repr(b):
            return "%s: expected %s, got %s" % (path, describe(a), describe(b))
        return None
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return "%s: expected %s, got %s" % (path, describe(a), describe(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    if isinstance(a, (set, frozenset)):
        if not isinstance(b, (set, frozenset)) or set(a) != set(b):
            return "%s: expected %s, got %s" % (path, describe(a), describe(b))
        return None
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return "%s: expected keys %s, got %s" % (path, describe(sorted(a)), describe(b))
        for k in a:
            d = diff(a[k], b[k], "%s[%r]" % (path, k))
            if d:
                return d
        return None
    if hasattr(a, "thrift_spec"):
        if type(a) is not type(b):
            return "%s: expected a %s, got %s" % (path, type(a).__name__, describe(b))
        for spec in a.thrift_spec:
            if spec:
                d = diff(getattr(a, spec[2]), getattr(b, spec[2]), path + "." + spec[2])
                if d:
                    return d
        return None
    if type(a) is not type(b) or a != b:
        return "%s: expected %s, got %s" % (path, describe(a), describe(b))
    return None


def hex_diff(expected, got):
    n = next((i for i, (x, y) in enumerate(zip(expected, got)) if x != y), min(len(expected), len(got)))
    lo = max(0, n - 16)
    return "lengths %d (Apache) vs %d (ours); first difference at byte %d:\n" \
           "      Apache: ...%s\n" \
           "        ours: ...%s\n" \
           "  Apache full: %s\n" \
           "    ours full: %s" % (len(expected), len(got), n, expected[lo:n + 24].hex(),
                                  got[lo:n + 24].hex(), expected.hex(), got.hex())


# ---------------------------------------------------------------------------------------
# Commands


def cmd_gen(out):
    errors = []
    for case in cases():
        for proto in ("binary", "compact"):
            data = encode(case.value, PROTOCOLS[proto])
            back, left = decode(data, type(case.value), PROTOCOLS[proto])
            d = diff(case.value, back, case.name)
            if d or left:
                errors.append("%s/%s: Apache does not read its own encoding back: %s" % (
                    case.name, proto, d or "%d trailing bytes" % left))
            out.write(json.dumps({
                "case": case.name, "type": case.label, "protocol": proto,
                "exact": case.exact, "expect": "ok", "hex": data.hex(),
            }) + "\n")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)


def cmd_check(path):
    by_name = {c.name: c for c in cases()}
    wanted = {(n, p) for n in by_name for p in ("binary", "compact")}
    seen = set()
    errors = []
    checked = 0
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            name, proto = rec["case"], rec["protocol"]
            where = "%s/%s (line %d)" % (name, proto, lineno)
            case = by_name.get(name)
            if case is None or proto not in PROTOCOLS:
                errors.append("%s: unknown case or protocol" % where)
                continue
            if (name, proto) in seen:
                errors.append("%s: duplicate" % where)
            seen.add((name, proto))
            data = bytes.fromhex(rec["hex"])
            if case.exact:
                own = encode(case.value, PROTOCOLS[proto])
                if own != data:
                    errors.append("%s: bytes differ from Apache's: %s" % (where, hex_diff(own, data)))
            try:
                value, left = decode(data, type(case.value), PROTOCOLS[proto])
            except Exception as e:  # noqa: BLE001 - report whatever Apache raised
                errors.append("%s: Apache failed to decode it: %s: %s" % (where, type(e).__name__, e))
                continue
            if left:
                errors.append("%s: %d trailing bytes" % (where, left))
            d = diff(case.from_rust, value, name)
            if d:
                errors.append("%s: %s" % (where, d))
            checked += 1
    for name, proto in sorted(wanted - seen):
        errors.append("%s/%s: missing from %s" % (name, proto, path))
    if errors:
        print("Apache Thrift disagrees with our generated code on %d point(s):" % len(errors), file=sys.stderr)
        print("\n".join("  " + e for e in errors), file=sys.stderr)
        sys.exit(1)
    print("apache_idls.py check: %d encodings decoded and matched (pure-Python decoders)" % checked)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["gen", "check", "cases", "patches"])
    ap.add_argument("file", nargs="?", help="check: our encodings (JSON lines)")
    ap.add_argument("--out", help="gen: write here instead of stdout")
    ap.add_argument("--gen-dir", help="generated Python code (created if absent)")
    ap.add_argument("--thrift", default=os.environ.get("THRIFT", "thrift"), help="the Thrift compiler")
    args = ap.parse_args()
    if args.command == "check" and not args.file:
        ap.error("check needs a FILE")
    if args.command == "patches":
        for name, old, new, why in IDL_PATCHES:
            print("%s: %r -> %r (%s)" % (name, old, new, why))
        return

    tmp = None
    gen_dir = args.gen_dir
    if gen_dir is None:
        tmp = gen_dir = tempfile.mkdtemp(prefix="thrift-interop-idls-py-")
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

#!/usr/bin/env python3
"""Checks the project rule: no function outside tests/ and bench/ over 150 lines.

Scans the C/C++ sources under the source root (default: this script's
parent directory), leaving out tests/, bench/, build*/ and any other CMake
build tree, third-party directories, hidden directories and nested
checkouts (a directory with its own .git). Prints every function over the
limit as `path:line: name is N lines (limit M)` and exits 1 if there is
one, else 0.
Usage: scripts/check-function-length.py [--max N] [--root DIR] [PATH ...]
(PATHs, files or directories, replace the default scan; tests/ and bench/
are then not left out); --self-test checks the checker on generated
sources. ctest: function_length, function_length_self_test.

A function's length runs from the first line of its declaration (its
template line, if any) to its closing brace, both included. The scan relies
on the layout clang-format gives the code (.clang-format): a function or
class declaration starts at its scope's indentation (column 0 at namespace
scope, anonymous namespaces included; two more per enclosing class), a
signature may continue on deeper-indented lines, and the body closes with
the first line at that indentation (or less) that starts with '}'.
Comments, string and character literals are blanked before a line is
looked at, block comments and raw string literals over several lines
included, so no brace inside them opens or closes anything. Functions
defined inside a class body are checked too; lambdas count towards the
function they are in (a lambda assigned at namespace scope counts as a
function)."""
import argparse
import os
import re
import sys

DEFAULT_MAX = 150
SOURCE_EXTENSIONS = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp")
# Top-level directories of the project that the rule does not cover.
EXCLUDED_TOP = {"tests", "bench"}
# Directory names that hold third-party or generated code, at any depth.
EXCLUDED_ANY = {"third_party", "third-party", "thirdparty", "vendor", "external", "_deps", "CMakeFiles"}

# Declarations that open a scope whose members are at the same indentation.
SAME_INDENT_SCOPES = ("namespace", "extern")
# Declarations that open a scope whose members are indented by two more.
CLASS_KEYWORDS = ("class", "struct", "union")
# Declarations that are no function (their braces are skipped as a block).
OTHER_KEYWORDS = ("enum", "typedef", "using", "static_assert", "concept", "requires")


def code_lines(text):
    """The lines of `text` with comments and literals blanked (same length
    and columns; a blanked literal keeps its quotes), each with whether it
    starts inside a block comment or a raw string literal."""
    out = []
    state = "code"  # code, block, string, char, raw
    raw_end = ""
    for line in text.split("\n"):
        starts_inside = state in ("block", "raw")
        buf = []
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if state == "block":
                if line.startswith("*/", i):
                    buf.append("  ")
                    i += 2
                    state = "code"
                else:
                    buf.append(" ")
                    i += 1
            elif state == "raw":
                if line.startswith(raw_end, i):
                    buf.append(" " * (len(raw_end) - 1) + '"')
                    i += len(raw_end)
                    state = "code"
                else:
                    buf.append(" ")
                    i += 1
            elif state in ("string", "char"):
                quote = '"' if state == "string" else "'"
                if c == "\\":
                    buf.append("  "[: min(2, n - i)])
                    i += 2
                elif c == quote:
                    buf.append(c)
                    i += 1
                    state = "code"
                else:
                    buf.append(" ")
                    i += 1
            elif line.startswith("//", i):
                buf.append(" " * (n - i))
                i = n
            elif line.startswith("/*", i):
                buf.append("  ")
                i += 2
                state = "block"
            elif c == '"':
                # R"delim( ... )delim", with an optional encoding prefix.
                prefix = re.search(r"(?:u8|u|U|L)?R$", line[:i])
                if prefix is not None and not re.match(r"\w", line[prefix.start() - 1 : prefix.start()]):
                    close = line.find("(", i + 1)
                    delim = line[i + 1 : close] if close >= 0 else ""
                    if close >= 0 and re.fullmatch(r"[^\s()\\]{0,16}", delim):
                        raw_end = ")" + delim + '"'
                        buf.append('"' + " " * (close - i))
                        i = close + 1
                        state = "raw"
                        continue
                buf.append(c)
                i += 1
                state = "string"
            elif c == "'":
                # A digit separator (1'000'000) when the token before it is a number.
                token = re.search(r"[\w.]*$", line[:i]).group(0)
                if token[:1].isdigit():
                    buf.append(" ")
                else:
                    buf.append(c)
                    state = "char"
                i += 1
            else:
                buf.append(c)
                i += 1
        if state in ("string", "char") and not line.endswith("\\"):
            state = "code"  # an unterminated literal ends with its line
        out.append(("".join(buf), starts_inside))
    return out


def indent_of(line):
    """The number of blanks `line` starts with."""
    return len(line) - len(line.lstrip(" \t"))


def strip_template_prefix(sig):
    """`sig` without leading `template <...>` clauses."""
    s = sig.lstrip()
    while s.startswith("template"):
        rest = s[len("template") :].lstrip()
        if not rest.startswith("<"):
            break
        depth = 0
        for j, ch in enumerate(rest):
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
                if depth == 0:
                    s = rest[j + 1 :].lstrip()
                    break
        else:
            break
    return s


def classify(sig):
    """'scope', 'class', 'function' or 'other' for a declaration that opens a brace."""
    s = strip_template_prefix(sig)
    first = re.match(r"[A-Za-z_]\w*", s)
    word = first.group(0) if first else ""
    if word in SAME_INDENT_SCOPES and (word == "namespace" or s.rstrip().endswith("{") and "(" not in s):
        return "scope"
    if word in CLASS_KEYWORDS:
        # `struct Foo* Make() {` is a function returning a pointer.
        head = s.split("{", 1)[0]
        if "(" in head and ":" not in head.split("(", 1)[0].replace("::", ""):
            return "function"
        return "class"
    if word in OTHER_KEYWORDS:
        return "other"
    head = s.split("(", 1)[0] if "(" in s else None
    if head is None:
        return "other"  # no parameter list: a brace initializer
    unary = re.sub(r"operator\s*(?:[^\s\w(]+|\(\))", "operator", head)
    if "=" in unary:
        # An initializer; a lambda assigned at namespace scope is a function.
        return "function" if re.search(r"=\s*\[", s) else "other"
    return "function"


def function_name(sig):
    """The (qualified) name a function's signature declares."""
    s = strip_template_prefix(sig)
    m = re.search(r"operator\s*\(\)\s*\(", s)
    head = s[: m.start()] + "operator()" if m else s.split("(", 1)[0]
    if "=" in head and re.search(r"=\s*\[", s):  # a lambda: the variable's name
        head = head.split("=", 1)[0]
    name = re.search(r"((?:[\w~]+(?:<[^()]*?>)?::)*(?:operator\s*\S+|~?\w+))\s*$", head.rstrip())
    return re.sub(r"\s+", " ", name.group(1)) if name else s.split("\n", 1)[0][:60]


def functions(text):
    """(first line, last line, name) of every function defined in `text` (1-based)."""
    lines = code_lines(text)
    found = []
    scopes = []  # indentation of the classes we are in
    member_indent = 0
    i = 0
    n = len(lines)
    while i < n:
        code, inside = lines[i]
        if inside or not code.strip():
            i += 1
            continue
        ind = indent_of(code)
        stripped = code.strip()
        if stripped.startswith("#"):  # preprocessor, with its continuation lines
            while i < n and lines[i][0].rstrip().endswith("\\"):
                i += 1
            i += 1
            continue
        if stripped.startswith("}"):
            # The end of a class (or namespace) we are in.
            while scopes and ind <= scopes[-1]:
                scopes.pop()
            member_indent = scopes[-1] + 2 if scopes else 0
            i += 1
            continue
        if ind != member_indent or stripped.endswith(":") and not stripped.endswith("::"):
            i += 1  # an access specifier, or a line of something not at this scope's indentation
            continue
        # A declaration: it runs to the line that ends with '{', ';' or '}'.
        start = i
        sig = []
        j = i
        end = None  # the line that ends the declaration
        while j < n:
            c, ins = lines[j]
            c = c.rstrip()
            if not ins and c.strip() and not c.strip().startswith("#"):
                if j > start and indent_of(c) < ind:
                    break  # not a declaration of this scope after all
                sig.append(c.strip())
                if c.endswith(("{", ";", "}")):
                    end = j
                    break
            j += 1
        if end is None:
            i = start + 1
            continue
        text_sig = " ".join(sig)
        if not lines[end][0].rstrip().endswith("{"):
            # A declaration, or a definition whose body closes on its last
            # line (e.g. a constructor's initializer list and `{}`).
            if "{" in text_sig and classify(text_sig) == "function":
                found.append((start + 1, end + 1, function_name(text_sig)))
            i = end + 1
            continue
        j = end
        kind = classify(text_sig)
        if kind == "scope":
            i = j + 1
            continue
        if kind == "class":
            scopes.append(ind)
            member_indent = ind + 2
            i = j + 1
            continue
        # A function or another block: it ends at the first line at its
        # indentation (or less) that starts with '}'.
        k = j + 1
        while k < n:
            c, ins = lines[k]
            if not ins and c.strip().startswith("}") and indent_of(c) <= ind:
                break
            k += 1
        if kind == "function":
            found.append((start + 1, min(k, n - 1) + 1, function_name(text_sig)))
        i = k + 1
    return found


def self_test():
    """Checks functions() on generated sources; returns the failures."""

    def body(n):
        return "".join(f"  x += {k};\n" for k in range(n))

    cases = [
        # (what, source, expected (first line, length) of each function)
        ("one-line signature", "int F() {\n" + body(10) + "}\n", [(1, 12)]),
        ("multi-line signature", "std::map<int, int> Foo::Bar(\n    int a,\n    int b) const {\n" + body(3)
         + "}\n", [(1, 7)]),
        ("anonymous namespace", "namespace {\n\nvoid F() {\n" + body(2) + "}\n\n}  // namespace\n", [(3, 4)]),
        ("template", "template <typename T>\nT F(T x) {\n" + body(1) + "}\n", [(1, 4)]),
        ("initializer list", "Foo::Foo(int a)\n    : a_(a),\n      b_(a) {}\nvoid G() {}\n", [(1, 3), (4, 1)]),
        ("raw string", 'void F() {\n  auto s = R"x(\n}\n{\n)x";\n' + body(3) + "}\n", [(1, 9)]),
        ("block comment", "void F() {\n  /* a\n}\n  */\n" + body(2) + "}\n", [(1, 7)]),
        ("braces in literals", "void F() {\n  const char* a = \"}\";  // }\n  char b = '{';\n" + body(2) + "}\n",
         [(1, 6)]),
        ("class members", "class A {\n public:\n  int F() const {\n" + body(2) + "  }\n  int G() const { return 1; }"
         "\n\n private:\n  struct B {\n    void H() {\n" + body(1) + "    }\n  };\n};\nvoid I() {\n}\n",
         [(3, 4), (7, 1), (11, 3), (16, 2)]),
        ("data table", "const int kT[] = {\n" + "".join(f"    {k},\n" for k in range(5)) + "};\n", []),
        ("declarations", "int F(int a,\n      int b);\nstruct S;\nenum class E {\n  kA,\n};\n", []),
        ("preprocessor", "#define M(x) \\\n}\nvoid F() {\n#if 1\n" + body(1) + "#endif\n}\n", [(3, 5)]),
        ("lambda at namespace scope", "const auto kF = [](int x) {\n" + body(2) + "};\n", [(1, 4)]),
        ("digit separator", "void F() {\n  int x = 1'000; /* '\n}\n  */\n}\n", [(1, 5)]),
    ]
    failures = []
    for what, src, want in cases:
        got = [(first, last - first + 1) for first, last, _ in functions(src)]
        if got != want:
            failures.append(f"{what}: found {got}, expected {want}")
    return failures


def source_files(root, paths):
    """The C/C++ files to check: those of `paths`, else the project's under `root`."""
    if paths:
        for p in paths:
            if os.path.isfile(p):
                yield p
                continue
            for d, dirs, files in os.walk(p):
                dirs[:] = sorted(x for x in dirs if not x.startswith("."))
                for f in sorted(files):
                    if f.endswith(SOURCE_EXTENSIONS):
                        yield os.path.join(d, f)
        return
    for d, dirs, files in os.walk(root):
        top = os.path.samefile(d, root)
        keep = []
        for x in sorted(dirs):
            if x.startswith(".") or x.startswith("build") or x in EXCLUDED_ANY:
                continue
            if top and x in EXCLUDED_TOP:
                continue
            if os.path.exists(os.path.join(d, x, ".git")):
                continue  # another checkout (a worktree or a submodule)
            if os.path.exists(os.path.join(d, x, "CMakeCache.txt")):
                continue  # a build tree of any name (generated code)
            keep.append(x)
        dirs[:] = keep
        for f in sorted(files):
            if f.endswith(SOURCE_EXTENSIONS):
                yield os.path.join(d, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max", type=int, default=DEFAULT_MAX, help="longest function allowed (lines)")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="source root (default: the project of this script)")
    ap.add_argument("paths", nargs="*", help="files or directories to check instead of the project's sources")
    ap.add_argument("--self-test", action="store_true", help="check the checker on generated sources")
    a = ap.parse_args()
    if a.self_test:
        failures = self_test()
        for f in failures:
            print(f"self-test: {f}")
        print(f"self-test: {'FAILED' if failures else 'passed'}")
        return 1 if failures else 0
    over = []
    files = 0
    for path in source_files(a.root, a.paths):
        files += 1
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for first, last, name in functions(text):
            length = last - first + 1
            if length > a.max:
                over.append((length, os.path.relpath(path, a.root) if not a.paths else path, first, name))
    for length, path, first, name in sorted(over, key=lambda o: (-o[0], o[1], o[2])):
        print(f"{path}:{first}: {name} is {length} lines (limit {a.max})")
    if over:
        print(f"{len(over)} function(s) over {a.max} lines in {files} files: split them into named helpers",
              file=sys.stderr)
        return 1
    print(f"no function over {a.max} lines in {files} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

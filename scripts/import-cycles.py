#!/usr/bin/env python3
"""Reports import cycles between the modules (files) of a Rust crate's src/ tree.

  scripts/import-cycles.py CRATE_SRC_DIR [--max-cycle-files N]

A module is a file (`a/b.rs` or `a/b/mod.rs` is `a::b`). An edge a -> b exists when a's code
names `crate::b...` (in `use` or in paths). Exits 1 and prints every strongly connected component
of more than one module (the import circles) unless there are none; exits 0 otherwise.
"""
import os
import re
import sys


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def main():
    root = sys.argv[1]
    files = []
    for d, _, fs in os.walk(root):
        files += [os.path.join(d, f) for f in fs if f.endswith(".rs")]
    mods = {module_of(root, f): f for f in files}
    edges = {m: set() for m in mods}
    path_re = re.compile(r"crate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)")
    use_group = re.compile(r"use crate::\{([^;]*)\};", re.S)
    for m, f in mods.items():
        text = open(f).read()
        # Test modules do not count: they may use anything.
        text = text.split("#[cfg(test)]")[0]
        # Comments (doc links included) do not import anything.
        text = re.sub(r"//[^\n]*", "", text)
        names = [p for p in path_re.findall(text)]
        for group in use_group.findall(text):
            names += [g.strip().split("::")[0] for g in group.split(",") if g.strip()]
        for name in names:
            parts = name.split("::")
            # The longest prefix that is a module.
            for k in range(len(parts), 0, -1):
                target = "::".join(parts[:k])
                if target in mods and target != m:
                    edges[m].add(target)
                    break
    # Tarjan's strongly connected components.
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(mods):
        if v not in index:
            strong(v)
    cycles = [sorted(c) for c in out if len(c) > 1]
    for c in cycles:
        print(f"import cycle of {len(c)} modules: {', '.join(c)}")
    if cycles:
        sys.exit(1)
    print(f"{root}: {len(mods)} modules, no import cycle")


if __name__ == "__main__":
    main()

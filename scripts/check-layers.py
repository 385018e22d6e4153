#!/usr/bin/env python3
"""The module layering of docs/DESIGN.md, checked against the code.

docs/DESIGN.md lists, under "What each folder includes today", every folder under src/ and
the folders its files include. This check fails when that list and the #include lines of
src/ disagree (either way), when a folder under src/ is missing from the list or from the
module table, when the list has a cycle (arrows point down, never up), or when a module
links (flashkv_module DEPS in src/<folder>/CMakeLists.txt) one the list does not put below
it.

Usage: check-layers.py <source root>
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/', re.M)
SOURCE_SUFFIXES = ('.h', '.cpp', '.cu', '.cuh', '.in')


def documented(design):
    """The "What each folder includes today" block: {folder: set(folders)}."""
    at = design.find('What each folder includes today')
    if at < 0:
        sys.exit('docs/DESIGN.md: no "What each folder includes today" section')
    start = design.index('```', at) + 3
    end = design.index('```', start)
    layers = {}
    for line in design[start:end].strip().splitlines():
        name, arrow, deps = line.partition('→')
        if not arrow:
            sys.exit(f'docs/DESIGN.md: not "folder → folders": {line!r}')
        layers[name.strip()] = set(deps.split())
    return layers


def included(src):
    """{folder: set(folders its files include)} for every folder under src/."""
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    out = {}
    for folder in folders:
        deps = set()
        for root, _, files in os.walk(os.path.join(src, folder)):
            for f in files:
                if f.endswith(SOURCE_SUFFIXES):
                    with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
                        deps.update(INCLUDE.findall(fh.read()))
        out[folder] = {d for d in deps if d in folders and d != folder}
    return out


MODULE = re.compile(r'flashkv_module\(\s*(\w+)([^)]*)\)', re.S)


def linked(src):
    """{folder: set(folders)} of the flashkv_module(NAME DEPS ...) calls under src/."""
    out = {}
    for root, _, files in os.walk(src):
        if 'CMakeLists.txt' not in files:
            continue
        with open(os.path.join(root, 'CMakeLists.txt'), encoding='utf-8') as fh:
            text = re.sub(r'#.*', '', fh.read())
        for name, args in MODULE.findall(text):
            out[name] = {d[len('flashkv_'):] for d in args.split() if d.startswith('flashkv_')}
    return out


def below(layers, folder):
    """Every folder the documented arrows reach from `folder`."""
    seen, todo = set(), list(layers.get(folder, ()))
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(layers.get(d, ()))
    return seen


def cycle(layers):
    """A cycle of the documented arrows, or None."""
    state = {}

    def visit(n, path):
        state[n] = 'open'
        for d in sorted(layers.get(n, ())):
            if state.get(d) == 'open':
                return path + [n, d]
            if d not in state:
                found = visit(d, path + [n])
                if found:
                    return found
        state[n] = 'done'
        return None

    for n in sorted(layers):
        if n not in state:
            found = visit(n, [])
            if found:
                return found
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    with open(os.path.join(root, 'docs', 'DESIGN.md'), encoding='utf-8') as fh:
        design = fh.read()
    doc = documented(design)
    code = included(os.path.join(root, 'src'))
    errors = []
    for folder, deps in code.items():
        if f'| `{folder}/` |' not in design:
            errors.append(f'src/{folder}/ has no row in the module table of docs/DESIGN.md')
        if folder not in doc and not deps:
            continue  # a folder that includes no other (util/) may go unlisted
        if folder not in doc:
            errors.append(f'src/{folder}/ is not in docs/DESIGN.md "What each folder includes '
                          f'today" (it includes: {" ".join(sorted(deps)) or "nothing"})')
            continue
        if deps - doc[folder]:
            errors.append(f'src/{folder}/ includes {" ".join(sorted(deps - doc[folder]))}, '
                          'which docs/DESIGN.md does not list for it')
        if doc[folder] - deps:
            errors.append(f'docs/DESIGN.md lists {" ".join(sorted(doc[folder] - deps))} for '
                          f'src/{folder}/, which includes none of it')
    for folder in doc:
        if folder not in code:
            errors.append(f'docs/DESIGN.md lists {folder}, which is no folder under src/')
    found = cycle(doc)
    if found:
        errors.append('docs/DESIGN.md has a cycle: ' + ' → '.join(found))
    for module, deps in linked(os.path.join(root, 'src')).items():
        if module not in code:
            continue  # a library of a subfolder (backend/cuda's), not a folder under src/
        up = {d for d in deps if d in code} - below(doc, module)
        if up:
            errors.append(f'src/{module}/CMakeLists.txt links {" ".join(sorted(up))}, which '
                          f'docs/DESIGN.md does not put below {module}')
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f'{len(code)} folders under src/: includes match docs/DESIGN.md, no cycle')
    return 0


if __name__ == '__main__':
    sys.exit(main())

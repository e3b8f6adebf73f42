"""Guards for CONTRIBUTING.md's layout rules: no import cycle (grimp reads imports inside functions too, so none
hides), no ORM under workers/, no module over 500 lines."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("webapp", "experiments", "workers")
# The size rule also holds for the client package (client/, installed on its own).
SIZED = (*PACKAGES, "client/tuneboard_client")
MAX_LINES = 500


def own_modules(graph) -> set[str]:
    return {m for m in graph.modules if m.split(".")[0] in PACKAGES and ".migrations" not in m}


def import_cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    modules = own_modules(graph)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & modules) for m in modules}
    index, low, on_stack, stack, cycles, counter = {}, {}, set(), [], [], 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return cycles


def test_no_import_cycle_among_the_projects_modules(graph):
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle(graph):
    # The guard above could pass by finding nothing at all: a cycle made on purpose is found.
    graph.add_import(importer="experiments.states", imported="experiments.services.jobs")
    try:
        assert any("experiments.states" in cycle and "experiments.services.jobs" in cycle
                   for cycle in import_cycles(graph))
    finally:
        graph.remove_import(importer="experiments.states", imported="experiments.services.jobs")


def orm_imports(graph, module: str) -> list[str]:
    """The lines of `module` that import the ORM: experiments.models or anything of django.db
    (grimp keeps an external package as one node, so Django's are told apart by their line)."""
    lines = []
    for imported in graph.find_modules_directly_imported_by(module):
        if imported == "experiments.models" or imported.startswith("experiments.models."):
            lines += [d["line_contents"] for d in graph.get_import_details(importer=module, imported=imported)]
        elif imported == "django":
            lines += [d["line_contents"] for d in graph.get_import_details(importer=module, imported=imported)
                      if d["line_contents"].replace("from ", "import ").split()[1].startswith("django.db")]
    return lines


def test_worker_code_persists_only_through_services(graph):
    offenders = {worker: orm_imports(graph, worker) for worker in own_modules(graph) if worker.startswith("workers")}
    assert {worker: lines for worker, lines in offenders.items() if lines} == {}


def test_the_orm_finder_finds_both_kinds_of_import(graph):
    assert any("django.db" in line for line in orm_imports(graph, "experiments.services.jobs"))
    assert orm_imports(graph, "experiments.services.trained_models")  # from experiments.models import ...


def test_no_module_over_500_lines():
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for folder in SIZED for path in (ROOT / folder).rglob("*.py") if "migrations" not in path.parts
    }
    assert len(sizes) > 100
    assert any(path.startswith("client/tuneboard_client/") for path in sizes)
    assert {path: lines for path, lines in sizes.items() if lines > MAX_LINES} == {}

"""CONTRIBUTING.md's dependency direction held on grimp's graph: experiments/ imports run one way, top to bottom,
and workers reach the domain only through services and selectors."""


from tests.layout.test_code_layout import own_modules

# experiments/'s top-level modules and packages, highest layer first. A module may import its
# own layer and any layer below it, never one above. Entries of an independent layer (True)
# may not import each other either: the leaves know nothing of one another but errors.
LAYERS: tuple[tuple[bool, tuple[str, ...]], ...] = (
    (False, ("urls", "admin", "apps", "management")),  # what Django loads by name
    (False, ("views", "api", "templatetags", "context_processors", "middleware")),  # the web
    (False, ("forms",)),
    (False, ("services",)),
    (False, ("selectors",)),
    (False, ("presentation",)),
    (False, ("models", "storage")),  # the ORM: tables, and the files kept in them
    (True, ("tuning", "datasets", "serving", "security", "ensembling", "states", "signals", "logformat", "scheduling")),
    (False, ("errors",)),
)
# What workers/ may import of experiments/: writes and reads, and what lies below them but the
# ORM (presentation and the leaves hold no rows). Never views/api/forms nor models.
WORKERS_REACH = ("services", "selectors", "presentation", *LAYERS[-2][1], *LAYERS[-1][1])
# Pages and the API ask selectors for what they show; the query machinery is a selector's.
QUERY_MACHINERY = "django.db"
QUERYING_LAYERS = ("views", "api")


def area(module: str) -> str | None:
    """The entry of LAYERS that an experiments module belongs to (None outside experiments)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "experiments" and len(parts) > 1 else None


def layer_of() -> dict[str, tuple[int, bool]]:
    return {name: (depth, independent) for depth, (independent, names) in enumerate(LAYERS) for name in names}


def edges(graph) -> list[tuple[str, str, str]]:
    """Every import among the project's modules: (importer, imported, line as written)."""
    modules = own_modules(graph)
    return [(importer, imported, detail["line_contents"])
            for importer in sorted(modules)
            for imported in sorted(graph.find_modules_directly_imported_by(importer) & modules)
            for detail in graph.get_import_details(importer=importer, imported=imported)]


def layer_breaks(imports: list[tuple[str, str, str]]) -> list[str]:
    """One readable line per import that goes up a layer, or sideways inside an independent one."""
    layers, breaks = layer_of(), []
    for importer, imported, line in imports:
        low, high = area(importer), area(imported)
        if importer.startswith("workers") and high is not None and high not in WORKERS_REACH:
            breaks.append(f"{importer} imports {imported} ({line}): workers reach experiments only through "
                          f"{', '.join(WORKERS_REACH)}")
        if low is not None and imported.split(".")[0] in ("webapp", "workers"):
            breaks.append(f"{importer} imports {imported} ({line}): the domain never imports webapp or workers")
        if low is None or high is None or low == high:
            continue
        if high not in layers or low not in layers:
            continue  # test_every_part_of_experiments_has_a_layer names it
        (low_depth, independent), (high_depth, _) = layers[low], layers[high]
        if high_depth < low_depth:
            breaks.append(f"{importer} imports {imported} ({line}): {low} sits below {high}")
        elif high_depth == low_depth and independent:
            breaks.append(f"{importer} imports {imported} ({line}): {low} and {high} are independent leaves")
    return breaks


def django_imports(graph) -> list[tuple[str, str]]:
    """(importer, line as written) for each import of Django by the project's modules."""
    return [(module, d["line_contents"]) for module in sorted(own_modules(graph))
            if "django" in graph.find_modules_directly_imported_by(module)
            for d in graph.get_import_details(importer=module, imported="django")]


def query_breaks(imports: list[tuple[str, str]]) -> list[str]:
    """Views and API modules that import django.db's query machinery instead of asking a selector."""
    return [f"{module} queries the ORM ({line}): ask a selector" for module, line in imports
            if area(module) in QUERYING_LAYERS
            and line.replace("from ", "import ").split()[1].startswith(QUERY_MACHINERY)]


def test_every_part_of_experiments_has_a_layer(graph):
    parts = {area(m) for m in own_modules(graph)} - {None}
    assert parts - set(layer_of()) == set()
    assert set(layer_of()) - parts == set()  # no stale entry


def test_no_import_goes_up_a_layer(graph):
    assert layer_breaks(edges(graph)) == []


def test_views_and_the_api_leave_queries_to_selectors(graph):
    assert query_breaks(django_imports(graph)) == []


def test_the_checker_reports_an_upward_import_by_name():
    imports = [
        ("experiments.presentation.cards", "experiments.services.artifacts", "from experiments.services import x"),
        ("experiments.services.studies", "experiments.selectors.studies", "from experiments.selectors import y"),
        ("experiments.tuning.bounds", "experiments.datasets.core", "from experiments.datasets import z"),
        ("workers.jobs.trials", "experiments.models", "from experiments.models import Study"),
        ("workers.jobs.trials", "experiments.services.trial_claims", "from experiments.services import w"),
        ("experiments.services.studies", "workers.tasks", "from workers.tasks import run_trial"),
    ]
    assert layer_breaks(imports) == [
        "experiments.presentation.cards imports experiments.services.artifacts (from experiments.services import x): "
        "presentation sits below services",
        "experiments.tuning.bounds imports experiments.datasets.core (from experiments.datasets import z): "
        "tuning and datasets are independent leaves",
        "workers.jobs.trials imports experiments.models (from experiments.models import Study): workers reach "
        f"experiments only through {', '.join(WORKERS_REACH)}",
        "experiments.services.studies imports workers.tasks (from workers.tasks import run_trial): the domain never "
        "imports webapp or workers",
    ]


def test_the_checker_finds_a_view_that_queries():
    imports = [("experiments.views.studies", "from django.db.models import Count"),
               ("experiments.views.studies", "from django.http import Http404"),
               ("experiments.selectors.studies", "from django.db.models import Count"),
               ("experiments.api.fleet", "from django.db import connection")]
    assert query_breaks(imports) == [
        "experiments.views.studies queries the ORM (from django.db.models import Count): ask a selector",
        "experiments.api.fleet queries the ORM (from django.db import connection): ask a selector"]

"""mkdocs hooks: build the pages that come from elsewhere in the repository at build time.

* ``index.md`` is README.md; ``CHANGELOG.md``, ``LICENSE``, ``CITATION.cff`` and ``spec/*.md``
  are those files (read from where they are, never copied into docs/).
* ``cli/*.md``: one page per command, holding that command's own ``--help`` output. The commands
  are discovered from the help text (``advest --help`` lists the subcommands, and so on down), so
  a new or renamed command changes the pages with no edit here.
* ``api/*.md``: one page per public module of advest (mkdocstrings renders the docstrings);
  their index is ``docs/api.md``, the public names and the policy (``scripts/api.py``).
* ``assets/mathjax/``: MathJax 3 from the ``django-static-mathjax`` wheel, so that viewing the
  site needs no network.

Run as a script (``python docs/hooks.py``) it prints the help pages as JSON: the build calls it
that way, in a subprocess, so the commands run exactly as ``advest ... --help`` would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

try:
    from mkdocs.plugins import event_priority
except ImportError:  # run as a script (the --help collector) without mkdocs installed

    def event_priority(priority: float) -> Any:
        return lambda f: f


ROOT = Path(__file__).resolve().parents[1]
HELP_COLUMNS = "100"  # argparse wraps to $COLUMNS: pin it so pages do not depend on the terminal


# ---------------------------------------------------------------------------------------------
# Commands: run in a subprocess (the __main__ block below), one Python start for all of them.


def _usage(help_text: str) -> str:
    """The usage paragraph of a help text, on one line."""
    paragraph = help_text.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def subcommands(path: tuple[str, ...]) -> list[str]:
    """The subcommands of ``advest <path>``, from the command table (``advest.cli.COMMANDS`` and
    the groups under it), so a new command gets its page without touching this file."""
    from advest.cli import groups

    table = groups().get(" ".join(("advest", *path)), ((), ""))[0]
    return [c.name for c in table]


def _capture_help(path: tuple[str, ...]) -> str:
    """``advest <path> --help``, through the command line's own entry point."""
    import contextlib
    import io

    from advest.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*path, "--help"])
        except SystemExit as stop:  # argparse exits after printing the help
            code = stop.code
    if code not in (0, None):
        raise RuntimeError(
            f"`advest {' '.join(path)} --help` exited with {code}:\n{err.getvalue()}"
        )
    return out.getvalue()


def collect_help() -> dict[str, str]:
    """Every command's help text by path: ``""``, ``"train"``, ``"experiment bandit"``."""
    pages: dict[str, str] = {}
    todo: list[tuple[str, ...]] = [()]
    while todo:
        path = todo.pop(0)
        text = _capture_help(path)
        pages[" ".join(path)] = text
        todo += [(*path, name) for name in subcommands(path)]
    return pages


def collect_estimators() -> str:
    """The Estimators page: ``advest list --markdown``, read from the registry."""
    import contextlib
    import io

    from advest.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["list", "--markdown"])
    return (
        "# Estimators\n\nEvery registered estimator, generated from its registry entry (its one "
        "declaration, `fast/registry.py`) when this site was built; `advest list` prints the "
        "same table. *Unbiased for* c·∇J: J = max@K for an estimator with K, the mean reward "
        "without; `-`: biased or not claimed (its spec page says which). *Cost*: the order of the "
        "time of one call in its sizes (B prompts, G samples, T tokens, ...: `spec/cost.py`), "
        "measured on the Cost growth page.\n\n" + out.getvalue()
    )


def spec_nav(families: list[str]) -> list[str]:
    """The Specification section: one page per family, in the registry's order, then every other
    page of spec/ (worked paths, the oracle), so a new family's page needs no edit of mkdocs.yml."""
    pages = [f"spec/{family}.md" for family in families]
    rest = sorted(f"spec/{p.name}" for p in (ROOT / "spec").glob("*.md"))
    return pages + [p for p in rest if p not in pages]


def _run_help_subprocess() -> dict[str, Any]:
    env = {**os.environ, "COLUMNS": HELP_COLUMNS, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"collecting the commands' --help failed:\n{done.stderr[-4000:]}")
    collected: dict[str, Any] = json.loads(done.stdout)
    return collected


def _command_page(path: str, text: str, children: list[str]) -> str:
    title = f"advest {path}".strip()
    lines = [
        f"# `{title}`",
        "",
        f"The output of `{title} --help`, generated when this site was built.",
        "",
        "```text",
        text.rstrip(),
        "```",
    ]
    if children:
        lines += ["", "Subcommands:", ""]
        lines += [f"* [`advest {c}`]({_command_file(c).split('/', 1)[1]})" for c in children]
    return "\n".join(lines) + "\n"


def _command_file(path: str) -> str:
    return "cli/index.md" if not path else "cli/" + path.replace(" ", "-") + ".md"


# ---------------------------------------------------------------------------------------------
# API reference: one page per public module, found on disk (nothing is imported).


def public_modules() -> list[str]:
    """``advest``, then every public module (``scripts/api.py``'s, the modules ``docs/api.md``
    lists: ``advest/``'s own, ``advest.cli`` and ``advest.testing`` among them, and those of
    the packages its links name), top-level packages first."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("api", ROOT / "scripts" / "api.py")
    assert spec is not None and spec.loader is not None
    api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(api)
    names: list[str] = list(api.modules(ROOT))
    return sorted(names, key=lambda n: (n.count(".") > 1, n))


def _api_page(module: str) -> str:
    return f"::: {module}\n"


# ---------------------------------------------------------------------------------------------
# Doctests in docstrings: shown as Python sessions, not as ">" quotes.


def fence_doctests(lines: list[str]) -> list[str]:
    """Wrap each run of ``>>>`` lines (with its output, up to a blank line) in a pycon fence.

    Lines inside existing ``` or ~~~ fences (the spec pages' doctests) are left alone.
    """
    out: list[str] = []
    fence: str | None = None  # the marker of the fence we are inside
    in_doctest = False
    doctest_indent = ""
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if in_doctest and not stripped:
            out += [doctest_indent + "```", line]
            in_doctest = False
            continue
        if not in_doctest:
            if fence is None and stripped[:3] in ("```", "~~~"):
                fence = stripped[:3]
            elif fence is not None and stripped.startswith(fence):
                fence = None
            elif fence is None and stripped.startswith(">>>"):
                doctest_indent = indent
                out.append(indent + "```pycon")
                in_doctest = True
        out.append(line)
    if in_doctest:
        out.append(doctest_indent + "```")
    return out


def _doctest_extension() -> Any:
    from markdown import Extension
    from markdown.preprocessors import Preprocessor

    class FenceDoctests(Preprocessor):
        def run(self, lines: list[str]) -> list[str]:
            return fence_doctests(lines)

    class DoctestExtension(Extension):
        def extendMarkdown(self, md: Any) -> None:
            # before the fenced-code preprocessors (priority 25), which then highlight it
            md.preprocessors.register(FenceDoctests(md), "advest_doctests", 40)

    return DoctestExtension()


# ---------------------------------------------------------------------------------------------
# mkdocs event hooks


_STATE: dict[str, Any] = {}


@event_priority(100)  # before mkdocstrings reads the Markdown extensions
def on_config(config: Any) -> Any:
    """Run the commands' --help once and put the generated pages into the nav."""
    config["markdown_extensions"].append(_doctest_extension())
    collected = _run_help_subprocess()
    helps: dict[str, str] = collected["help"]
    if "train" not in helps:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"no `train` among the discovered commands: {sorted(helps)}")
    modules = public_modules()
    _STATE.update(helps=helps, modules=modules, estimators=collected["estimators"])
    commands = [{f"advest {p}": _command_file(p)} for p in helps if p]
    api: list[Any] = ["api.md", {"advest": "api/advest.md"}]
    by_package: dict[str, list[Any]] = {}
    for module in modules[1:]:
        package = ".".join(module.split(".")[:2])
        by_package.setdefault(package, []).append({module: f"api/{module}.md"})
    api += [{package: items} for package, items in by_package.items()]
    nav = []
    for item in config["nav"]:
        if item == {"Commands": "cli/index.md"}:
            item = {"Commands": ["cli/index.md", *commands]}
        elif item == {"API reference": "api.md"}:
            item = {"API reference": api}
        elif item == {"Specification": "spec/"}:
            item = {"Specification": ["estimators.md", *spec_nav(collected["families"])]}
        nav.append(item)
    config["nav"] = nav
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the README, the changelog, the spec pages, the generated pages and MathJax."""
    from mkdocs.structure.files import File

    def add_text(uri: str, content: str) -> None:
        files.append(File.generated(config, uri, content=content))

    def add_file(uri: str, path: Path) -> None:
        files.append(File.generated(config, uri, abs_src_path=str(path)))

    add_file("index.md", ROOT / "README.md")
    add_file("CHANGELOG.md", ROOT / "CHANGELOG.md")  # README links it by this name
    add_file("LICENSE", ROOT / "LICENSE")
    add_file("CITATION.cff", ROOT / "CITATION.cff")
    for spec in sorted((ROOT / "spec").glob("*.md")):
        add_file(f"spec/{spec.name}", spec)
    for proof in sorted((ROOT / "proofs" / "coq").glob("*.v")):  # the spec links each theorem
        add_file(f"proofs/coq/{proof.name}", proof)

    helps: dict[str, str] = _STATE["helps"]
    for path, text in helps.items():
        children = [p for p in helps if p.rsplit(" ", 1)[0] == path and p != path and p]
        if not path:
            children = [p for p in helps if p and " " not in p]
        add_text(_command_file(path), _command_page(path, text, children))

    add_text("estimators.md", _STATE["estimators"])
    modules: list[str] = _STATE["modules"]  # the index is docs/api.md (scripts/api.py)
    for module in modules:
        add_text(f"api/{module}.md", _api_page(module))

    import mathjax  # django-static-mathjax: MathJax's own release files, no Django needed

    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    add_file("assets/mathjax/tex-svg-full.js", es5 / "tex-svg-full.js")
    add_file("assets/mathjax/LICENSE", es5.parent / "LICENSE")
    return files


if __name__ == "__main__":
    from advest.fast import registry

    found = {"help": collect_help(), "estimators": collect_estimators()}
    json.dump({**found, "families": registry.families()}, sys.stdout)

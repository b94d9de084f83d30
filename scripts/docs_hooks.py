"""MkDocs hook: pages generated at build time, so they cannot drift from the code.

- ``reference/api.md``: every route of ``plaudit serve all`` from its OpenAPI schema (summary,
  parameters, request body and answers), built without starting the app's lifespan;
- ``benchmarks.md``: the repository's BENCHMARKS.md, which lives beside README.md; links to it
  from the pages (``../BENCHMARKS.md``, right when read on the repository) point at that page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("get", "post", "put", "patch", "delete")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "reference/api.md", content=api_reference()))
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "benchmarks.md", content=benchmarks))
    return files


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    depth = page.file.src_uri.count("/")
    return re.sub(r"\]\((?:\.\./)+BENCHMARKS\.md", "](" + "../" * depth + "benchmarks.md", markdown)


def api_reference() -> str:
    from services.app import create_app

    schema = create_app().openapi()
    lines = [
        "# API reference",
        "",
        f"Generated from the OpenAPI schema of `plaudit serve all` ({schema['info']['title']} "
        f"{schema['info']['version']}); a running server serves the same at `/docs` and "
        "`/openapi.json`. Errors always use the envelope of [API conventions](../api.md).",
        "",
    ]
    for path, item in sorted(schema["paths"].items()):
        for method in METHODS:
            if method in item:
                lines += _operation(method, path, item[method], schema)
    return "\n".join(lines) + "\n"


def _operation(
    method: str, path: str, operation: dict[str, Any], schema: dict[str, Any]
) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", ""]
    description = str(operation.get("description") or operation.get("summary") or "")
    if description:
        lines += [description.strip().split("\n\n")[0], ""]
    params = operation.get("parameters", [])
    if params:
        lines += ["| parameter | in | required | type | description |", "|---|---|---|---|---|"]
        for param in params:
            kind = _type(param.get("schema", {}), schema)
            text = _cell(param.get("description") or param.get("schema", {}).get("description"))
            lines.append(
                f"| `{param['name']}` | {param['in']} | {param.get('required', False)} | {kind} "
                f"| {text} |"
            )
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body:
        lines += [f"Body: {_type(body['schema'], schema)}", ""]
        lines += _fields(body["schema"], schema)
    answers = ", ".join(f"`{code}`" for code in operation.get("responses", {}))
    lines += [f"Answers: {answers}", ""]
    return lines


def _fields(ref: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    model = _resolve(ref, schema)
    props = model.get("properties", {})
    if not props:
        return []
    required = set(model.get("required", []))
    lines = ["| field | type | required | description |", "|---|---|---|---|"]
    for name, prop in props.items():
        text = _cell(prop.get("description"))
        lines.append(f"| `{name}` | {_type(prop, schema)} | {name in required} | {text} |")
    return [*lines, ""]


def _cell(text: object) -> str:
    """A description on one table line."""
    return " ".join(str(text or "").split()).replace("|", "\\|")


def _resolve(ref: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in ref:
        name = ref["$ref"].rsplit("/", 1)[1]
        resolved: dict[str, Any] = schema["components"]["schemas"][name]
        return resolved
    return ref


def _type(prop: dict[str, Any], schema: dict[str, Any]) -> str:
    if "$ref" in prop:
        return f"`{prop['$ref'].rsplit('/', 1)[1]}`"
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(_type(option, schema) for option in prop[key])
    if prop.get("type") == "array":
        return f"list of {_type(prop.get('items', {}), schema)}"
    if "enum" in prop:
        return " \\| ".join(json.dumps(value) for value in prop["enum"])
    return str(prop.get("type", "any"))

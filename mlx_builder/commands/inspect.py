"""`mlx-builder inspect`: what a wheel (or bundle) contains and where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mlx_builder.commands.options import json_flag
from mlx_builder.console import console
from mlx_builder.wheelbuild.bundle import read_bundle_json
from mlx_builder.wheelbuild.manifest import read_manifest


def describe_manifest(m: dict) -> list[str]:
    lines = [f"version:   {m.get('version')}",
             f"upstream:  {m.get('upstream_url')} {m.get('upstream_ref')} "
             f"{m.get('upstream_commit')} (MLX {m.get('upstream_version')})",
             f"series:    {m.get('series') or '-'} (base {m.get('series_base') or '-'}, "
             f"patch set {m.get('patch_set_hash') or '-'})"]
    lines += [f"  patch    {p['file']}  [{p.get('target')}]  sha256 {str(p.get('sha256', ''))[:16]}…  "
              f"{p.get('upstream', '')}" for p in m.get("patches", [])]
    lines.append(f"target:    {m.get('target')} ({m.get('backend')}) archs "
                 f"{';'.join(map(str, m.get('archs') or [])) or '-'}")
    code = m.get("gpu_code") or {}
    if code:
        lines.append(f"gpu code:  SASS {', '.join(code.get('sass', []))}; PTX "
                     f"{', '.join(code.get('ptx', [])) or '-'} (checked with {code.get('method')})")
    plat = m.get("platform") or {}
    if plat:
        glibc = f"; glibc >= {plat['glibc_min']}" if plat.get("glibc_min") else ""
        grafted = (f"; grafted {', '.join(plat['grafted'])}" if plat.get("grafted") else "")
        lines.append(f"platform:  {plat.get('name')} ({plat.get('tag')}{glibc}{grafted})")
    tc = m.get("toolchain", {})
    if tc:
        lines.append("toolchain: " + ", ".join(f"{k} {v}" for k, v in sorted(tc.items())))
    for d in m.get("dependencies", []):
        ref = d.get("ref") if d.get("ref") and d.get("ref") != d.get("pin") else ""
        lines.append(f"  dep      {d['name']} {d.get('pin')}{' (used ' + ref + ')' if ref else ''}"
                     f" via {d.get('via')} sha256 {str(d.get('sha256', ''))[:16]}…")
    if m.get("disabled_options"):
        lines.append("disabled:  " + ", ".join(m["disabled_options"]))
    if m.get("runtime_requires"):
        lines.append("requires:  " + ", ".join(m["runtime_requires"]))
    if "built_from" in m:
        lines.append(f"built:     from {m.get('built_from')} by {m.get('tool')}")
    return lines


@click.command("inspect")
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@json_flag(help="Print the raw manifest JSON.")
def command(path: Path, as_json: bool) -> None:
    """Print a wheel's mlx-builder manifest (or a bundle's bundle.json)."""
    if path.name.endswith((".tar.gz", ".tgz")):
        data = read_bundle_json(path)
        if as_json:
            click.echo(json.dumps(data, indent=2, sort_keys=True))
            return
        prov = data.get("provenance", {})
        flat = {**prov, "version": data.get("label"), "target": data["target"]["spec"],
                "backend": data["target"]["backend"], "archs": data["target"]["archs"],
                "dependencies": data.get("dependencies", []),
                "disabled_options": data.get("disabled_options", []),
                "built_from": f"(bundle, not built yet) {path.name}", "tool": data.get("tool")}
        console.print("\n".join(describe_manifest(flat)), markup=False)
        return
    manifest = read_manifest(path)
    if as_json:
        click.echo(json.dumps(manifest, indent=2, sort_keys=True))
        return
    console.print("\n".join(describe_manifest(manifest)), markup=False)

"""The build stage: targets, the toolchain checks, FetchContent dependencies
and bundles, the wheel build itself, its SASS check, manylinux repair and
the provenance manifest it carries."""

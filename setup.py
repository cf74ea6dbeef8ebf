"""Packages of the distribution: ``harness`` and ``reference_broker`` as they are, and the
top-level ``suites/`` directory shipped as ``kafka_harness_suites`` (harness/conformance/suites.py
says why); pyproject.toml's static configuration cannot rename a package directory."""

from setuptools import find_packages, setup

SUITES = "kafka_harness_suites"

setup(
    packages=[
        *find_packages(include=["harness", "harness.*", "reference_broker",
                                "reference_broker.*"]),
        # Java sources only (the checker's compiled passes, built at a Spark session's start):
        # a directory without __init__.py, which find_packages passes over.
        "harness.checker.jvm",
        SUITES,
        *(f"{SUITES}.{name}" for name in find_packages("suites")),
    ],
    package_dir={SUITES: "suites"},
)

"""The one thing pyproject.toml cannot say: which packages the wheel holds.

Every package under gql_memory/, found by setuptools (namespace packages too: the browser
UIs' folders of static files hold no __init__.py), and Alembic's migrations/, which lives at
the top of the repository by Alembic's convention and ships inside the wheel as
gql_memory.migrations (the folder mapping and the package data are in pyproject.toml's
[tool.setuptools] sections). setuptools' find in pyproject.toml cannot name a folder as a
subpackage of another, hence this file; everything else about the build is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

NOT_PACKAGES = ["*__pycache__*"]

setup(
    packages=[
        *find_namespace_packages(include=["gql_memory", "gql_memory.*"], exclude=NOT_PACKAGES),
        "gql_memory.migrations",
        *(
            f"gql_memory.migrations.{package}"
            for package in find_namespace_packages("migrations", exclude=NOT_PACKAGES)
        ),
    ]
)

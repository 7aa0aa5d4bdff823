"""The one thing pyproject.toml cannot say: ``integrations/`` installs as ``cl_plugins.integrations``.

The repository keeps the design card's layout (``cl_plugins/`` the core, ``integrations/`` the adapters beside it),
while a wheel, an sdist's install and an editable install all give users one import name, ``cl_plugins``.
"""

from setuptools import find_packages, setup

ADAPTERS = "integrations"
INSTALLED_AS = "cl_plugins.integrations"

core = find_packages(include=["cl_plugins", "cl_plugins.*"])
adapters = [INSTALLED_AS + name[len(ADAPTERS):] for name in find_packages(include=[ADAPTERS, f"{ADAPTERS}.*"])]
setup(packages=core + adapters, package_dir={INSTALLED_AS: ADAPTERS})

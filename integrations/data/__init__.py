"""The data layer: the catalogue every host declares its datasets into, verified downloads, data and cache
locations, and the ``cl-plugins data`` command."""

"""The exporter's one kind of error, and where in the user's code an equation came from."""
from jax._src import source_info_util


class ExportError(Exception):
    """A function tpusim cannot take: the message names what and where, on one line."""


def where(eqn) -> str:
    """file:line:column (function) of the user code that made `eqn`, the file by its base name."""
    text = source_info_util.summarize(eqn.source_info)
    return text.rsplit("/", 1)[-1]

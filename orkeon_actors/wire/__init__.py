"""The wire formats: every (de)serialisation of the package's values, in one place.

One base converter (:mod:`~orkeon_actors.wire.base`: ids, addresses, metadata maps and
a datetime rule, registered once) and one module per format, each stating its datetime
rule in its docstring:

* :mod:`~orkeon_actors.wire.snapshot`: the crew snapshot's JSON (UTC ``Z``; ``+00:00`` read);
* :mod:`~orkeon_actors.wire.store_row`: the SQLite store's columns (fixed-width UTC ``Z``);
* :mod:`~orkeon_actors.wire.tool_json`: what a model reads and writes (UTC ``Z``, an
  offset required on input), with :mod:`~orkeon_actors.wire.payload` for payload bytes;
* :mod:`~orkeon_actors.wire.studio_feed`: a message in the Studio's live feed (UTC ``Z``);
* :mod:`~orkeon_actors.wire.amqp`: the envelope of a message on an AMQP broker (UTC ``Z``).

The layers that own a format's records register them on the format's converter: the
crew its snapshot, the store its rows, the tools their DTOs.
"""

from orkeon_actors.wire.base import DatetimeRule, base_converter

__all__ = ["DatetimeRule", "base_converter"]

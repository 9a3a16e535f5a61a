"""One place to import the readers that turn pieces copied from a notice into values.

The model copies each stated value verbatim (a coordinate, a radius, a limit, a time, as
written); these read the copies: ``coordinates`` (degrees), ``limits`` (metres and a
reference), ``times`` (aware UTC datetimes). Pure functions over strings; knows nothing
of schemas, models or decoding.
"""

from .coordinates import coordinate_pieces, read_coordinate, read_position
from .limits import read_limit, read_radius, states_a_maximum
from .times import read_time, read_time_range, stated_clock

__all__ = ["coordinate_pieces", "read_coordinate", "read_limit", "read_position", "read_radius", "read_time",
           "read_time_range", "stated_clock", "states_a_maximum"]

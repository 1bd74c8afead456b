"""The ROS 2 distributions replay knows the standard message definitions of.

A module of its own so the ``replay`` command's options can name them without importing the
readers (and the pipeline) while the command line starts.
"""

from __future__ import annotations

__all__ = ["DEFAULT_ROS_DISTRO", "ROS_DISTROS"]

#: the ROS 2 distribution whose standard message definitions decode types a recording does not define
DEFAULT_ROS_DISTRO = "humble"
ROS_DISTROS = ("foxy", "galactic", "humble", "iron", "jazzy", "kilted")

"""What a person looks at: episode rows, timelines, paths on a map and payload series.

Everything here reads the store through the public ``Memory`` API only (an episode's records
narrow, on ``Memory.store``: robotmem.store.outline), so the web view (`robotmem ui`) and the
matplotlib pictures (`session show --plot`) draw the same data.
"""

from .episodes import episode_detail, episode_list, episode_span, episode_timeline, with_overviews
from .occupancy import latest_map, load_ros_map, store_map
from .paths import episode_paths
from .plot import plot_episode

__all__ = ["episode_detail", "episode_list", "episode_paths", "episode_span", "episode_timeline",
           "latest_map", "load_ros_map", "plot_episode", "store_map", "with_overviews"]

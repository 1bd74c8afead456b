"""ROS integration for robotmem: the shared ingestion pipeline, offline replay and the rosbridge client.

``bridges`` builds on robotmem's public API only (``robotmem.Memory``, ``robotmem.errors``);
``robotmem`` itself never imports it.
"""

#: The bridge config file looked for in ROBOTMEM_HOME (here, not in bridges.pipeline, so the
#: command-line help can name it without importing the pipeline).
BRIDGE_CONFIG_NAME = "bridge.toml"

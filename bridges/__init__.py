"""ROS integration for robotmem: the shared ingestion pipeline, offline replay and the rosbridge client.

``bridges`` builds on robotmem's public API only (``robotmem.Memory``, ``robotmem.errors``);
``robotmem`` itself never imports it.
"""

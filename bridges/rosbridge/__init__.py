"""The live ROS bridge: rosbridge websocket (protocol v2) -> robotmem, via roslibpy."""

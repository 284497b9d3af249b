"""Support of the shared scenario suite: the scenario agent, its runners, its Worker child."""

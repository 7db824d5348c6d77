"""`udm demo`: the end-to-end main job on real data (see `udm.host.demo.job`)."""

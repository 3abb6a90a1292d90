"""Where a training plan's ranks run: the hosts (healthy only) and which GPU of which host runs each rank, chosen so
that TP groups stay in one NVLink domain and pipeline neighbours under one leaf switch, and what the cost model must
price where the inventory cannot give the idealised fabric it assumes (costmodel/placed_fabric.py)."""

"""Node agents: the daemon on each node that runs NCAs (node.py, standard library only) and the
server's side of its connection (link.py). docs/agent.md."""

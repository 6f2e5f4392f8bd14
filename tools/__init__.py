"""The tools on what the program declares: the offline render and its writer, the diff of renders, adoption, and the
read-only cluster readers (drift, recovery, status). They import the program and the configs; only cli/ imports them."""

"""The tools that work on what the program declares: the offline render (the program under Pulumi's mock runtime)
and its writer, the diff of two renders, adoption of hand-made objects, and the read-only cluster readers (drift,
recovery). They import the program (components/, policy/) and the configs; only cli/ imports them."""

"""`make bench`: what rendering costs, measured against importing pulumi_kubernetes."""

"""The switch aggregator NCA (thesis §3.5.6): P4 program in p4/, controller and plugin here.

    query.py       what the switch can run; a partial aggregation in the switch's terms
    controller.py  one class per P4 control, owning its tables and registers (table entries as data)
    backends.py    where they are written: Tofino (BF Runtime), BMv2 (P4Runtime), the switch model
    plugin.py      the operator and life-cycle interfaces (`switch.aggregate`, `switch.model`)
    golden.py      golden files of the table entries (tests/unit/golden/switch/)

docs/switch.md says how it works and how to run it on a Tofino, on BMv2 and on the model.
"""

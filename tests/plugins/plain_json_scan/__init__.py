"""An NCA plugin from outside the jumpgate package that brings its own native driver: a JSON Lines
scan whose filters and projections are the built-in code generator's C, linked with a plain C
driver shipped beside it (plain_scan.c) instead of the built-in simdjson scan.

It is what docs/adding-an-nca.md describes for a third party: the driver registered with
`register_driver` when the plugin's module is imported, the implementation found through the
`jumpgate.ncas` entry point (tests/e2e/test_outside_plugin.py writes one for it, as installing a
package would), and the conformance suite run against it.
"""

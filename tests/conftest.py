"""Test-suite wide setup.

The broker fixtures (`kafkette_broker`, `kafkette_broker_in_process`) live in the package so
that applications get them too; installed, the package registers them as a pytest11 plugin
under the same name, so pytest loads the module once whichever way it is found first.
"""

pytest_plugins = ["kafkette.broker.testing"]

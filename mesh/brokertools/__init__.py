"""Broker-side tooling, apart from the core: the local Mosquitto `mesh up` runs, its files and
generated rules (ACL, dynamic security), the speed probe, test certificates and the record of a
running `mesh up`. Nothing in the call path imports this package."""

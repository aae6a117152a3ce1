"""Fixtures every test folder can use. Server fixtures live in tests/fixtures/ as plugins."""

pytest_plugins: list[str] = [
    "tests.fixtures.kubernetes",
    "tests.fixtures.kubernetes_harness",
    "tests.fixtures.real_kubernetes",
    "tests.fixtures.zookeeper",
    "tests.fixtures.spark",
]

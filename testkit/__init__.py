"""The testkit distribution's own tests live in testkit/tests/, imported as ``testkit.tests`` so
that their module names never collide with the product suite's ``tests`` package; the
distribution itself is testkit/src/kubecoord_testkit."""

"""SpecServe's tools: the SGLang emulator, bench and calibrate, the policy simulator and the local demo.

A separate distribution (`specserve-tools`) that depends on the operator (`specserve`) and is never imported by
it; its commands join the `specserve` CLI through the `specserve.commands` entry-point group."""

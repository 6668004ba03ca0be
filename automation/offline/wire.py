"""Markers of the Pulumi property protocol, as they travel on the wire between the engine, the program
and a policy pack (pulumi/pulumi sdk/go/common/resource/sig/sig.go; plugin/rpc.go for the unknown).

An object carrying :data:`SIG_KEY` is special: a secret (:data:`SECRET_SIG`, its plain value under
``value``), a resource reference (:data:`RESOURCE_REF_SIG`: ``urn``, ``id``) or an output value
(:data:`OUTPUT_VALUE_SIG`). A value not known yet travels as :data:`UNKNOWN_STRING`.
"""

SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
RESOURCE_REF_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
OUTPUT_VALUE_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

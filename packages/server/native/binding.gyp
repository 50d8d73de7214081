{
  "targets": [
    {
      "target_name": "countersign_seal",
      "sources": ["seal.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    }
  ]
}

"""The resolver: a Request (requirements plus where the image must run) and the matrix in, one Stack out, or the reasons why none."""

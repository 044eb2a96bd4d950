"""Helpers the tests share: free ports, waiting for servers, launching service processes."""

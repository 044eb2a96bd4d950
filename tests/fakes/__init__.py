"""The only stand-ins in the tests: local servers that speak paid providers' wire protocols."""

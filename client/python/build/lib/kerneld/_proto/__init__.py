# Generated from proto/ at build time (client/python/setup.py).

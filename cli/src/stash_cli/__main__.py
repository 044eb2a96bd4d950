from stash_cli.main import app

app()

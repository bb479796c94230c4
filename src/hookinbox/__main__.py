from hookinbox.cli import main

main(prog_name="hookinbox")

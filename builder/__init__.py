"""3XCM builder: the image pool built in stages (``builder.stage_list``) into one catalog."""

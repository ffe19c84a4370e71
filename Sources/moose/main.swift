print("moose")
